package idleconn_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/idle/idleconn"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/wheel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair listens on 127.0.0.1:0 through WrapListener with cfg on a manual
// clock and returns the accepted server side (wrapped) and the client side.
// only returns c with the defaults a wrapped Conn applies (idle, max age,
// write stall) turned off where c leaves them zero: only what a test sets
// is on.
func only(c idle.Config) idle.Config {
	for _, p := range []*time.Duration{&c.IdleTimeout, &c.MaxAge, &c.WriteStallTimeout} {
		if *p == 0 {
			*p = idle.Off
		}
	}
	return c
}

func pair(t *testing.T, cfg idle.Config) (*wheel.ManualClock, *wheel.Wheel, *idleconn.Conn, net.Conn) {
	t.Helper()
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	t.Cleanup(w.Stop)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln, err := idleconn.WrapListener(raw, w, cfg)
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	sc, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	return clk, w, sc.(*idleconn.Conn), client
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
	clk, w, sc, client := pair(t, only(idle.Config{IdleTimeout: 30 * time.Second}))

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
	// whichever it sees first, and either way learns that the conn is
	// closed, not that a deadline can be moved and the Read retried.
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded)
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
	clk, _, sc, _ := pair(t, only(idle.Config{IdleTimeout: 10 * time.Second}))
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
	clk, _, sc, _ := pair(t, only(idle.Config{HandshakeTimeout: 5 * time.Second}))
	done := readAsync(sc)
	clk.Advance(5 * time.Second)
	assert.ErrorIs(t, waitErr(t, done), idle.ReasonHandshake)
}

func TestConn_WriteStall(t *testing.T) {
	clk, _, sc, _ := pair(t, only(idle.Config{WriteStallTimeout: 5 * time.Second}))
	done := make(chan error, 1)
	go func() {
		// The client never reads: this fills both socket buffers and blocks.
		_, err := sc.Write(make([]byte, 64<<20))
		done <- err
	}()
	require.Eventually(t, sc.WriteTimerArmed, 10*time.Second, time.Millisecond)
	clk.Advance(5 * time.Second)
	err := waitErr(t, done)
	require.ErrorIs(t, err, idle.ReasonWriteStall)
}

func TestConn_CloseStopsTracking(t *testing.T) {
	clk, w, sc, _ := pair(t, only(idle.Config{IdleTimeout: time.Second, MaxAge: time.Minute}))
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
		{name: "keepalive needs a probe", cfg: only(idle.Config{KeepaliveTime: time.Second, KeepaliveTimeout: time.Second}), want: idle.ErrKeepalive},
		{name: "no frames", cfg: only(idle.Config{FrameTimeout: time.Second}), want: idle.ErrNoEffect},
		{name: "invalid", cfg: only(idle.Config{KeepaliveCount: -1}), want: idle.ErrNegative},
		{name: "a typo is not Off, even where the wrapper turns it off", cfg: only(idle.Config{FrameTimeout: -5}), want: idle.ErrNegative},
		{name: "shorter than the tick", cfg: only(idle.Config{IdleTimeout: time.Microsecond}), want: idle.ErrTooShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idleconn.WrapConn(a, w, tc.cfg)
			assert.ErrorIs(t, err, tc.want)
			_, err = idleconn.WrapListener(nil, w, tc.cfg)
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
	c, err := idleconn.WrapConn(a, w, only(idle.Config{ReadSilenceTimeout: 20 * time.Millisecond}))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	elapsed := time.Since(start)
	require.ErrorIs(t, err, idle.ReasonDeadPeer)
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.GreaterOrEqual(t, elapsed, 20*time.Millisecond, "never early")
	assert.Less(t, elapsed, 5*time.Second)
}

// TestCloseError_Timeout classifies every reason: Timeout is true where a
// timeout closed the connection and false for max_age, so that a loop
// retrying on timeouts does not spin on a connection closed for its age. A
// reason added without a row here fails the test.
func TestCloseError_Timeout(t *testing.T) {
	rows := []struct {
		reason  idle.Reason
		timeout bool
	}{
		{reason: idle.ReasonIdle, timeout: true},
		{reason: idle.ReasonDeadPeer, timeout: true},
		{reason: idle.ReasonKeepalive, timeout: true},
		{reason: idle.ReasonFrameDeadline, timeout: true},
		{reason: idle.ReasonHandshake, timeout: true},
		{reason: idle.ReasonWriteStall, timeout: true},
		{reason: idle.ReasonMaxAge, timeout: false},
		{reason: idle.ReasonNone, timeout: false},
		{reason: idle.Reason(200), timeout: false}, // unknown
	}
	classified := map[idle.Reason]bool{}
	for _, row := range rows {
		classified[row.reason] = true
		t.Run(row.reason.String(), func(t *testing.T) {
			var ne net.Error = &idleconn.CloseError{Reason: row.reason, Err: io.ErrClosedPipe}
			assert.Equal(t, row.timeout, ne.Timeout())
			assert.False(t, ne.Temporary())
			assert.ErrorIs(t, ne, row.reason)
			assert.ErrorIs(t, ne, net.ErrClosed, "always: the tracker closed the conn")
			assert.ErrorIs(t, ne, io.ErrClosedPipe, "the underlying error")
		})
	}
	for _, r := range idle.Reasons() {
		assert.True(t, classified[r], "reason %s has no row: is it a timeout?", r)
	}
}

// TestConn_CloseErrors closes a wrapped TCP conn for each reason a wrapper
// can have, with a Read blocked and then a fresh one: each returns a
// *CloseError that names the reason, says the conn is closed, does not
// pretend a deadline can be moved, and reports Timeout as the reason
// deserves.
func TestConn_CloseErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     idle.Config
		reason  idle.Reason
		timeout bool
	}{
		{name: "idle", cfg: only(idle.Config{IdleTimeout: 10 * time.Second}), reason: idle.ReasonIdle, timeout: true},
		{name: "read silence", cfg: only(idle.Config{ReadSilenceTimeout: 10 * time.Second}), reason: idle.ReasonDeadPeer, timeout: true},
		{name: "handshake", cfg: only(idle.Config{HandshakeTimeout: 10 * time.Second}), reason: idle.ReasonHandshake, timeout: true},
		{name: "max age", cfg: only(idle.Config{MaxAge: 10 * time.Second}), reason: idle.ReasonMaxAge, timeout: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, _, sc, _ := pair(t, tc.cfg)
			blocked := readAsync(sc)
			clk.Advance(10 * time.Second)
			require.Equal(t, tc.reason, sc.Tracker().Reason())
			for i, err := range []error{waitErr(t, blocked), readErr(sc)} {
				var ce *idleconn.CloseError
				require.ErrorAs(t, err, &ce, "read %d", i)
				assert.Equal(t, tc.reason, ce.Reason)
				assert.ErrorIs(t, err, tc.reason)
				assert.ErrorIs(t, err, net.ErrClosed)
				assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the close's past deadline is not one to move")
				var ne net.Error
				require.ErrorAs(t, err, &ne)
				assert.Equal(t, tc.timeout, ne.Timeout())
			}
		})
	}
}

func readErr(c net.Conn) error {
	_, err := c.Read(make([]byte, 1))
	return err
}

// The interfaces that io.Copy, net/http and the os package look for, and
// the TCP settings, whatever the wrapped conn.
var (
	_ io.ReaderFrom = (*idleconn.Conn)(nil)
	_ io.WriterTo   = (*idleconn.Conn)(nil)
	_ syscall.Conn  = (*idleconn.Conn)(nil)
	_ interface {
		CloseRead() error
		CloseWrite() error
		SetKeepAlive(bool) error
		SetKeepAlivePeriod(time.Duration) error
		SetKeepAliveConfig(net.KeepAliveConfig) error
		SetNoDelay(bool) error
		SetLinger(int) error
		NetConn() net.Conn
	} = (*idleconn.Conn)(nil)
)

// TestConn_TCPMethods calls the TCP methods through the wrapper: they
// reach the *net.TCPConn, and SyscallConn's RawConn works but hides the
// poller the os and net packages would splice or sendfile with directly,
// past the tracker.
func TestConn_TCPMethods(t *testing.T) {
	_, _, sc, client := pair(t, only(idle.Config{}))
	inner, ok := sc.NetConn().(*net.TCPConn)
	require.True(t, ok)
	assert.Same(t, inner, sc.Conn)
	assert.NoError(t, sc.SetKeepAlive(true))
	assert.NoError(t, sc.SetKeepAlivePeriod(time.Minute))
	assert.NoError(t, sc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Minute, Interval: time.Second, Count: 3}))
	assert.NoError(t, sc.SetNoDelay(false))
	assert.NoError(t, sc.SetLinger(0))

	rc, err := sc.SyscallConn()
	require.NoError(t, err)
	var fd uintptr
	require.NoError(t, rc.Control(func(f uintptr) { fd = f }))
	irc, err := inner.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, irc.Control(func(f uintptr) { assert.Equal(t, fd, f) }))
	_, hasPoll := reflect.TypeOf(irc).MethodByName("PollFD")
	require.True(t, hasPoll, "the net package's RawConn offers its poller")
	_, hasPoll = reflect.TypeOf(rc).MethodByName("PollFD")
	assert.False(t, hasPoll, "the wrapper's RawConn hides it")

	// CloseWrite sends a FIN; the conn still reads and stays tracked.
	require.NoError(t, sc.CloseWrite())
	_, err = client.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	_, err = client.Write([]byte("x"))
	require.NoError(t, err)
	_, err = io.ReadFull(sc, make([]byte, 1))
	require.NoError(t, err)
	require.NoError(t, sc.CloseRead())
	_, err = sc.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
}

// TestConn_Unsupported wraps a conn that has none of the TCP methods: each
// says so with errors.ErrUnsupported, and ReadFrom and WriteTo copy
// through Write and Read, which mark activity.
func TestConn_Unsupported(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	a, b := net.Pipe()
	defer b.Close()
	c, err := idleconn.WrapConn(a, w, only(idle.Config{IdleTimeout: time.Minute}))
	require.NoError(t, err)
	defer c.Close()
	for name, call := range map[string]func() error{
		"CloseWrite":         c.CloseWrite,
		"CloseRead":          c.CloseRead,
		"SyscallConn":        func() error { _, err := c.SyscallConn(); return err },
		"SetKeepAlive":       func() error { return c.SetKeepAlive(true) },
		"SetKeepAlivePeriod": func() error { return c.SetKeepAlivePeriod(time.Second) },
		"SetKeepAliveConfig": func() error { return c.SetKeepAliveConfig(net.KeepAliveConfig{}) },
		"SetNoDelay":         func() error { return c.SetNoDelay(true) },
		"SetLinger":          func() error { return c.SetLinger(0) },
	} {
		err := call()
		assert.ErrorIs(t, err, errors.ErrUnsupported, name)
		assert.ErrorContains(t, err, "idleconn: wrapped *net.pipe has no "+name, name)
	}

	clk.Advance(time.Second)
	go func() {
		_, _ = b.Write([]byte("hello"))
		_ = b.Close()
	}()
	var got bytes.Buffer
	n, err := io.Copy(&got, c) // c.WriteTo: through Read
	require.NoError(t, err)
	assert.EqualValues(t, 5, n)
	assert.Equal(t, time.Second, c.LastIn())

	a2, b2 := net.Pipe()
	defer b2.Close()
	c2, err := idleconn.WrapConn(a2, w, only(idle.Config{IdleTimeout: time.Minute}))
	require.NoError(t, err)
	defer c2.Close()
	clk.Advance(time.Second)
	done := receive(b2)
	n, err = io.Copy(c2, strings.NewReader("hello")) // c2.ReadFrom: through Write
	require.NoError(t, err)
	assert.EqualValues(t, 5, n)
	assert.Equal(t, 2*time.Second, c2.LastActivity())
	require.NoError(t, c2.Close())
	assert.Equal(t, "hello", string(waitBytes(t, done)))
}

// TestConn_AboveTLSExpireDoesNotBlock wraps a *tls.Conn (the wrapper above
// TLS) whose peer has stopped reading, over a pipe that holds no byte: the
// close a timeout makes, on the wheel's goroutine (inside Advance here),
// returns at once, where tls.Conn.Close alone would wait 5 s to write a
// close_notify nobody reads.
func TestConn_AboveTLSExpireDoesNotBlock(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	cert, roots, err := selfSigned()
	require.NoError(t, err)
	a, b := net.Pipe()
	server := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true})
	client := tls.Client(b, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	defer client.Close()
	handshook := make(chan error, 1)
	go func() { handshook <- client.Handshake() }()
	require.NoError(t, server.Handshake())
	require.NoError(t, waitErr(t, handshook))
	c, err := idleconn.WrapConn(server, w, only(idle.Config{IdleTimeout: time.Second}))
	require.NoError(t, err)
	defer c.Close()

	lag := lagmeter.New(t)
	start := time.Now()
	clk.Advance(time.Second)
	elapsed := time.Since(start)
	require.Equal(t, idle.ReasonIdle, c.Tracker().Reason())
	assert.Less(t, elapsed, lag.Slack(2*time.Second), "the close blocked the wheel")
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, idle.ReasonIdle)
}
