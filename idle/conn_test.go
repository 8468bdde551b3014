package idle_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair listens on 127.0.0.1:0 through WrapListener with cfg on a manual
// clock and returns the accepted server side (wrapped) and the client side.
func pair(t *testing.T, cfg idle.Config) (*wheel.ManualClock, *wheel.Wheel, *idle.Conn, net.Conn) {
	t.Helper()
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	t.Cleanup(w.Stop)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln, err := idle.WrapListener(raw, w, cfg)
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	sc, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	return clk, w, sc.(*idle.Conn), client
}

// readAsync starts a Read on c and returns a channel with its error.
func readAsync(c net.Conn) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 64))
		ch <- err
	}()
	return ch
}

// waitErr waits for a blocked call to return; the timeout only guards
// against a hang, it does not wait for a timer.
func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("blocked call did not return")
		return nil
	}
}

func TestConn_IdleReapsBlockedRead(t *testing.T) {
	clk, w, sc, client := pair(t, idle.Config{IdleTimeout: 30 * time.Second})

	// Traffic at 20s keeps the connection open past 30s.
	clk.Advance(20 * time.Second)
	_, err := client.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(sc, buf)
	require.NoError(t, err)
	clk.Advance(29 * time.Second) // 49s
	require.Equal(t, idle.ReasonNone, sc.Tracker().Reason())

	done := readAsync(sc)
	clk.Advance(time.Second) // 50s: 30s after the last Read
	err = waitErr(t, done)
	require.ErrorIs(t, err, idle.ReasonIdle)
	// The reaper sets a past deadline, then closes: a blocked Read wakes on
	// whichever it sees first.
	assert.True(t, errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded),
		"a blocked Read sees the closed conn or the expired deadline: %v", err)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	assert.Contains(t, err.Error(), "idle")

	// Every later Read and Write says why too.
	_, err = sc.Read(buf)
	assert.ErrorIs(t, err, idle.ReasonIdle)
	_, err = sc.Write(buf)
	assert.ErrorIs(t, err, idle.ReasonIdle)
	// And the peer sees the close.
	_, err = client.Read(buf)
	assert.ErrorIs(t, err, io.EOF)
	assert.Zero(t, w.Len())
}

func TestConn_WritesCountAsActivity(t *testing.T) {
	clk, _, sc, _ := pair(t, idle.Config{IdleTimeout: 10 * time.Second})
	for range 5 {
		clk.Advance(9 * time.Second)
		_, err := sc.Write([]byte("x"))
		require.NoError(t, err)
	}
	require.Equal(t, idle.ReasonNone, sc.Tracker().Reason())
	clk.Advance(10 * time.Second)
	assert.Equal(t, idle.ReasonIdle, sc.Tracker().Reason())
}

func TestConn_Handshake(t *testing.T) {
	clk, _, sc, _ := pair(t, idle.Config{HandshakeTimeout: 5 * time.Second})
	done := readAsync(sc)
	clk.Advance(5 * time.Second)
	assert.ErrorIs(t, waitErr(t, done), idle.ReasonHandshake)
}

func TestConn_WriteStall(t *testing.T) {
	clk, _, sc, _ := pair(t, idle.Config{WriteStallTimeout: 5 * time.Second})
	done := make(chan error, 1)
	go func() {
		// The client never reads: this fills both socket buffers and blocks.
		_, err := sc.Write(make([]byte, 64<<20))
		done <- err
	}()
	require.Eventually(t, sc.Tracker().WriteArmed, 10*time.Second, time.Millisecond)
	clk.Advance(5 * time.Second)
	err := waitErr(t, done)
	require.ErrorIs(t, err, idle.ReasonWriteStall)
}

func TestConn_CloseStopsTracking(t *testing.T) {
	clk, w, sc, _ := pair(t, idle.Config{IdleTimeout: time.Second, MaxAge: time.Minute})
	require.Equal(t, 1, w.Len())
	require.NoError(t, sc.Close())
	assert.Zero(t, w.Len())
	clk.Advance(time.Hour)
	_, err := sc.Read(make([]byte, 1))
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.NotErrorIs(t, err, idle.ReasonIdle, "closed by its owner, not by a timeout")
}

func TestWrapConn_Config(t *testing.T) {
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	defer w.Stop()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, tc := range []struct {
		name string
		cfg  idle.Config
		want error
	}{
		{name: "keepalive needs a probe", cfg: idle.Config{KeepaliveTime: time.Second, KeepaliveTimeout: time.Second}, want: idle.ErrKeepalive},
		{name: "no frames", cfg: idle.Config{FrameTimeout: time.Second}, want: idle.ErrNoEffect},
		{name: "invalid", cfg: idle.Config{IdleTimeout: -1}, want: idle.ErrNegative},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idle.WrapConn(a, w, tc.cfg)
			assert.ErrorIs(t, err, tc.want)
			_, err = idle.WrapListener(nil, w, tc.cfg)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	assert.Zero(t, w.Len())
}

// TestConn_RealWheel runs the wrapper on a real wheel with a short timeout:
// the only test that waits for wall time, bounded by the timeout itself.
func TestConn_RealWheel(t *testing.T) {
	w := wheel.New()
	defer w.Stop()
	a, b := net.Pipe()
	defer b.Close()
	start := time.Now() // before the wrap, which starts the silence timer
	c, err := idle.WrapConn(a, w, idle.Config{ReadSilenceTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	elapsed := time.Since(start)
	require.ErrorIs(t, err, idle.ReasonDeadPeer)
	assert.True(t, errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrDeadlineExceeded), "underlying error kept: %v", err)
	assert.GreaterOrEqual(t, elapsed, 20*time.Millisecond, "never early")
	assert.Less(t, elapsed, 5*time.Second)
}
