package netserver

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// opened hands each accepted connection to the test.
type opened chan *Conn

func (o opened) OnOpen(c *Conn)        { o <- c }
func (opened) OnMessage(*Conn, []byte) {}
func (opened) OnClose(*Conn, Reason)   {}

// KernelConfig's doc: with only KeepaliveIdle set, the interval is a fifth
// of it and the count 5 (gnet's choice), not the system's defaults
// (net.ipv4.tcp_keepalive_intvl, 75 s, and _probes, 9).
func TestKernelConfig_KeepaliveDefaultsAsDocumented(t *testing.T) {
	for _, tc := range []struct {
		name         string
		kernel       KernelConfig
		wantInterval int // seconds
		wantCount    int
	}{
		{name: "idle only", kernel: KernelConfig{KeepaliveIdle: 10 * time.Second}, wantInterval: 2, wantCount: 5},
		{name: "all set", kernel: KernelConfig{KeepaliveIdle: 10 * time.Second, KeepaliveInterval: 3 * time.Second, KeepaliveCount: 4},
			wantInterval: 3, wantCount: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(opened, 1)
			s, err := New(Config{Addr: "127.0.0.1:0", EventLoops: 1, Kernel: tc.kernel}, ch)
			require.NoError(t, err)
			require.NoError(t, s.Start())
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				assert.NoError(t, s.Shutdown(ctx))
			}()
			nc, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			defer nc.Close()
			var c *Conn
			select {
			case c = <-ch:
			case <-time.After(5 * time.Second):
				t.Fatal("no connection opened")
			}
			fd := c.gc.Fd() // the socket stays open while nc is: reading options is safe
			on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
			require.NoError(t, err)
			assert.Equal(t, 1, on)
			idle, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
			require.NoError(t, err)
			assert.Equal(t, 10, idle)
			intvl, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
			require.NoError(t, err)
			assert.Equal(t, tc.wantInterval, intvl)
			cnt, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
			require.NoError(t, err)
			assert.Equal(t, tc.wantCount, cnt)
		})
	}
}
