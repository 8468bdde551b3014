package netserver_test

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver"
)

// memConns is how many idle connections the memory test holds open per
// server: enough that a byte per connection stands out of the runtime's
// own noise (a few KiB), few enough for the open-file limit (two
// descriptors each, and bare gnet's stay open while netserver's are
// measured: about 8 000 at once).
const memConns = 2000

// memBudget is the most Go heap a default Raw connection may hold beyond
// what bare gnet holds for the same connection (the target: at most 512 B
// of RSS; docs/design.md, "What a connection holds"). Measured at 377 B,
// of which 96 B are the max-age state that cmd/echo's default max age
// allocates, so it fails if what a connection shed comes back (the output
// watch allocated up front, 128 B) or several small things add up; a
// single 16-byte step is left to TestConn_Size and idle's
// TestTracker_BytesPerNew.
const memBudget = 448

// TestMemoryPerIdleConn measures the Go heap that memConns idle
// connections hold, each having echoed one byte, on a server with
// cmd/echo's default settings (Raw; handshake 10 s, idle 5 min, write
// stall 30 s, max age 1 h ± 6 min, default output limits), and on bare
// gnet, and requires the
// difference per connection to stay within memBudget. The clients are raw
// sockets, which take no Go heap.
func TestMemoryPerIdleConn(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2100 connections to each of two servers")
	}
	bare := heapPerConn(t, startBareGnet(t))
	s := start(t, netserver.Config{
		EventLoops: 1,
		Protocol:   netserver.Raw,
		Timeouts: idle.Config{
			HandshakeTimeout:  10 * time.Second,
			IdleTimeout:       5 * time.Minute,
			WriteStallTimeout: 30 * time.Second,
			MaxAge:            time.Hour,
			MaxAgeJitter:      6 * time.Minute,
		},
	}, netserver.Echo{})
	ours := heapPerConn(t, s.Addr())
	t.Logf("Go heap per idle connection: netserver %.0f B, bare gnet %.0f B, difference %.0f B (budget %d B)",
		ours, bare, ours-bare, memBudget)
	assert.LessOrEqual(t, ours-bare, float64(memBudget), "Go heap per idle connection above bare gnet's")
	assert.Positive(t, bare, "bare gnet holds something per connection: the measure works")
}

// heapPerConn opens memConns connections to addr, has each echo one byte,
// and returns the growth of the Go heap, after a collection, divided by
// memConns. The connections are closed when the test ends.
func heapPerConn(t *testing.T, addr net.Addr) float64 {
	t.Helper()
	ta := addr.(*net.TCPAddr)
	sa := &unix.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	fds := make([]int, 0, memConns)
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	// A first round sizes what grows once (maps, the loop's buffers).
	open := func(n int) {
		for range n {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			fds = append(fds, fd)
			require.NoError(t, connect(fd, sa))
			require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10}))
			b := []byte{'x'}
			_, err = retryEINTR(func() (int, error) { return unix.Write(fd, b) })
			require.NoError(t, err)
			n, err := retryEINTR(func() (int, error) { return unix.Read(fd, b) })
			require.NoError(t, err)
			require.Equal(t, 1, n, "the echo")
		}
	}
	open(100)
	before := heapAfterGC()
	open(memConns)
	after := heapAfterGC()
	return float64(int64(after)-int64(before)) / memConns
}

// retryEINTR calls f until it fails with something other than EINTR: the
// runtime's preemption signals interrupt the blocking system calls this
// test makes directly (a read with SO_RCVTIMEO is not restarted).
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// connect connects the blocking socket fd to sa, going on when a signal
// interrupts it: the connection then completes on its own, and connect
// again reports EALREADY until it has, then EISCONN.
func connect(fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	for err == unix.EINTR || err == unix.EALREADY {
		err = unix.Connect(fd, sa)
	}
	if err == unix.EISCONN {
		return nil
	}
	return err
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// bareEcho is gnet with nothing of ours: the echo of the baseline.
type bareEcho struct {
	gnet.BuiltinEventEngine
	eng chan gnet.Engine
}

func (b *bareEcho) OnBoot(eng gnet.Engine) gnet.Action {
	b.eng <- eng
	return gnet.None
}

func (b *bareEcho) OnTraffic(c gnet.Conn) gnet.Action {
	buf, _ := c.Next(-1)
	_, _ = c.Write(buf)
	return gnet.None
}

// startBareGnet runs a bare gnet echo server, as loadtest's "gnet", on a
// free port of 127.0.0.1 until the test ends, and returns its address.
func startBareGnet(t *testing.T) net.Addr {
	t.Helper()
	b := &bareEcho{eng: make(chan gnet.Engine, 1)}
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(b, "tcp://127.0.0.1:0", gnet.WithMulticore(true), gnet.WithNumEventLoop(1), gnet.WithTicker(false))
	}()
	var eng gnet.Engine
	select {
	case eng = <-b.eng:
	case err := <-done:
		require.NoError(t, err, "bare gnet did not start")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, eng.Stop(ctx))
		<-done
	})
	fd, err := eng.Dup()
	require.NoError(t, err)
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	a, ok := sa.(*unix.SockaddrInet4)
	require.True(t, ok, "an IPv4 listener")
	return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
}
