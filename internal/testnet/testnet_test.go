package testnet_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/internal/testnet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes every connection on 127.0.0.1:0 until the test ends,
// half-closing after the peer's half-close; its goroutines end with the
// test.
func echoServer(t *testing.T) net.Addr {
	t.Helper()
	addr, err := net.ResolveTCPAddr("tcp", testnet.Serve(t, func(c net.Conn, _ uint64) {
		if _, err := io.Copy(c, c); err == nil {
			_ = c.(*net.TCPConn).CloseWrite()
		}
	}))
	require.NoError(t, err)
	return addr
}

func listen(t *testing.T, cfg testnet.Config) *testnet.Proxy {
	t.Helper()
	p, err := testnet.Listen(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func dial(t *testing.T, p *testnet.Proxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	return c.(*net.TCPConn)
}

// Every round trip through the proxy takes at least twice the one-way
// delay, jitter or not: never early. Lateness is only bounded loosely
// (the machine is shared).
func TestProxy_RoundTripAtLeastTwiceTheDelay(t *testing.T) {
	for _, tc := range []struct {
		name          string
		delay, jitter time.Duration
	}{
		{name: "delay=50ms", delay: 50 * time.Millisecond},
		{name: "delay=20ms,jitter=10ms", delay: 20 * time.Millisecond, jitter: 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := listen(t, testnet.Config{Target: echoServer(t).String(), Delay: tc.delay, Jitter: tc.jitter})
			c := dial(t, p)
			b := make([]byte, 1)
			var longest time.Duration
			for i := range 5 {
				start := time.Now()
				_, err := c.Write([]byte{byte(i)})
				require.NoError(t, err)
				_, err = io.ReadFull(c, b)
				require.NoError(t, err)
				rtt := time.Since(start)
				require.Equal(t, byte(i), b[0])
				require.GreaterOrEqual(t, rtt, 2*tc.delay, "round trip %d came early", i)
				longest = max(longest, rtt)
			}
			assert.Less(t, longest, 2*tc.delay+2*tc.jitter+5*time.Second, "lateness, loosely")
		})
	}
}

// A stream written in random pieces, some a byte, comes back whole and in
// order through both directions' jittered holds, and the half-close
// travels through: the echo server's EOF comes after the last byte.
func TestProxy_KeepsTheByteStreamAndTheHalfClose(t *testing.T) {
	p := listen(t, testnet.Config{Target: echoServer(t).String(), Delay: 2 * time.Millisecond, Jitter: 3 * time.Millisecond, Buffer: 64 << 10})
	c := dial(t, p)
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]byte, 2<<20)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- b
	}()
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(40000))
		if rng.IntN(8) == 0 {
			n = 1
		}
		_, err := c.Write(rest[:n])
		require.NoError(t, err)
		rest = rest[n:]
	}
	require.NoError(t, c.CloseWrite())
	b := <-got
	require.Equal(t, len(want), len(b))
	require.True(t, bytes.Equal(want, b), "the stream changed on the way")
}

// The held bytes are bounded: a target that never reads stalls the
// sender's writes once the kernel's buffers and the proxy's Buffer are
// full, instead of the proxy taking everything.
func TestProxy_BoundedBuffer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	p := listen(t, testnet.Config{Target: ln.Addr().String(), Buffer: 64 << 10})
	c := dial(t, p)
	tc, ok := <-accepted
	require.True(t, ok)
	defer tc.Close()

	// Socket buffers autotune up to tcp_wmem's and tcp_rmem's maximum: a
	// send and a receive buffer on each side of the proxy. The proxy adds
	// at most its Buffer and two pieces; an unbounded one takes all that
	// is written.
	bound := 2*(sysctlMax(t, "tcp_wmem", 4<<20)+sysctlMax(t, "tcp_rmem", 6<<20)) + 64<<10 + 2*16<<10
	chunk := make([]byte, 64<<10)
	written := 0
	for written < bound+32<<20 {
		// A write that makes no progress for 300 ms: the sender is stalled.
		require.NoError(t, c.SetWriteDeadline(time.Now().Add(300*time.Millisecond)))
		n, err := c.Write(chunk)
		written += n
		if err != nil {
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			break
		}
	}
	assert.Less(t, written, bound, "the proxy kept taking what its target does not read")
}

// sysctlMax returns the maximum (third) value of net.ipv4's name, or def
// where there is no such file.
func sysctlMax(t *testing.T, name string, def int) int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if errors.Is(err, os.ErrNotExist) {
		return def
	}
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.Len(t, f, 3, "%s: %q", name, b)
	v, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	return v
}

// Close ends every goroutine of the proxy, with connections open and bytes
// held, and the clients see their connections end. The target is a bare
// listener (the kernel completes the handshakes) so that no goroutine but
// the proxy's and the test's runs.
func TestProxy_CloseStopsEverything(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	p, err := testnet.Listen(testnet.Config{Target: ln.Addr().String(), Delay: time.Hour})
	require.NoError(t, err)
	var cs []*net.TCPConn
	for range 3 {
		c := dial(t, p)
		_, err := c.Write([]byte("held for an hour"))
		require.NoError(t, err)
		cs = append(cs, c)
	}
	start := time.Now()
	require.NoError(t, p.Close())
	assert.Less(t, time.Since(start), 5*time.Second, "Close waited for the hour")
	require.NoError(t, p.Close(), "idempotent")
	goleak.VerifyNone(t)
	for _, c := range cs {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := c.Read(make([]byte, 1))
		require.Error(t, err)
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the connection outlived Close: %v", err)
	}
	_, err = net.DialTimeout("tcp", p.Addr().String(), time.Second)
	assert.Error(t, err, "still accepting after Close")
}

// Many connections at once, as a drain test of 200 peers needs: each
// gets its own echo, none later than the delay allows.
func TestProxy_ManyConnections(t *testing.T) {
	const conns, delay = 200, 10 * time.Millisecond
	p := listen(t, testnet.Config{Target: echoServer(t).String(), Delay: delay})
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", p.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			msg := []byte(strconv.Itoa(i))
			start := time.Now()
			if _, err := c.Write(msg); err != nil {
				errs <- err
				return
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				errs <- err
				return
			}
			if rtt := time.Since(start); rtt < 2*delay {
				errs <- fmt.Errorf("connection %d: round trip %v, under twice %v", i, rtt, delay)
			}
			if !bytes.Equal(msg, got) {
				errs <- fmt.Errorf("connection %d: got %q", i, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestListen_Rejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  testnet.Config
	}{
		{name: "no target", cfg: testnet.Config{}},
		{name: "negative delay", cfg: testnet.Config{Target: "127.0.0.1:1", Delay: -1}},
		{name: "negative jitter", cfg: testnet.Config{Target: "127.0.0.1:1", Jitter: -1}},
		{name: "negative buffer", cfg: testnet.Config{Target: "127.0.0.1:1", Buffer: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := testnet.Listen(tc.cfg)
			assert.Error(t, err)
		})
	}
}
