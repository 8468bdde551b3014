package netserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// busyConn opens a framed connection whose echo stays unacknowledged, so a
// graceful shutdown must wait for it.
func busyConn(t *testing.T, s *netserver.Server) *testpeer.Peer {
	t.Helper()
	busy := dial(t, s)
	busy.Push(frame.AppendData(nil, 1, []byte("unacked")))
	for {
		f, err := busy.Next(waitFor)
		require.NoError(t, err)
		if f.Type == frame.TypeData {
			return busy
		}
	}
}

// At the deadline Shutdown cuts a connection that has not finished (its
// echo unacknowledged): the peer, told GOAWAY at the start, gets CLOSE
// code 2 before the close, and the cut is counted (Stats.Cut, and
// Closed["shutdown"]) and logged at info level by the time Done is closed.
func TestShutdown_DeadlineCutsBusyConnections(t *testing.T) {
	cfg := withAddr(framedCfg())
	log, logs := newLogCapture()
	cfg.Logger = log
	s, err := netserver.New(cfg, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	busy := busyConn(t, s)
	lag := lagmeter.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	assert.ErrorIs(t, s.Shutdown(ctx), context.DeadlineExceeded)
	// Every wait in Shutdown is bounded by ctx: it returns at the deadline,
	// not after the engine has stopped.
	assert.Less(t, time.Since(began), 200*time.Millisecond+lag.Slack(150*time.Millisecond))
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not stop after the deadline cut its connections")
	}
	assert.Zero(t, s.Stats().Open)
	assert.Equal(t, int64(1), s.Stats().Closed["shutdown"])
	assert.Equal(t, int64(1), s.Stats().Cut)
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.Contains(t, rec.Body.String(), "\nnetwheel_shutdown_cuts_total 1\n")
	assert.NoError(t, s.Err())
	var cuts int
	for _, a := range logs.attrsOf("netserver: connection closed") {
		if a["cut"].Kind() == slog.KindBool && a["cut"].Bool() {
			cuts++
			assert.Equal(t, "shutdown", a["reason"].String())
			assert.Equal(t, int64(1), intAttr(t, a, "unacked_messages"))
		}
	}
	assert.Equal(t, 1, cuts, "the cut is logged")

	// What the peer saw: GOAWAY (code 2, the server's last DATA 1, a grace
	// within the 200ms), the PING after it, then CLOSE code 2 and the end.
	var types []frame.Type
	var code frame.Code
	for {
		f, err := busy.Next(2 * time.Second)
		if testpeer.Closed(err) {
			break
		}
		require.NoError(t, err)
		if f.Type == frame.TypeAck || f.Type == frame.TypeData {
			continue // of its DATA, and retransmissions of the echo
		}
		types = append(types, f.Type)
		switch f.Type {
		case frame.TypeGoAway:
			assert.Equal(t, frame.CodeShutdown, f.Code)
			assert.Equal(t, uint64(1), f.Seq)
			assert.LessOrEqual(t, f.Grace, 200*time.Millisecond)
		case frame.TypeClose:
			code = f.Code
		}
	}
	assert.Equal(t, []frame.Type{frame.TypeGoAway, frame.TypePing, frame.TypeClose}, types)
	assert.Equal(t, frame.CodeShutdown, code)
}

// Shutdown closes the listener before it waits for busy connections: a new
// connection is refused by the kernel (not accepted and then closed), while
// the busy one is still served.
func TestShutdown_StopsAcceptingFirst(t *testing.T) {
	s, err := netserver.New(withAddr(framedCfg()), netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	addr := s.Addr().String()
	busy := busyConn(t, s)

	done := make(chan error, 1)
	go func() {
		// Long: the drain must end by the busy connection's ACK, not by
		// a deadline a busy machine could reach first.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	var dialErr error
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return false
		}
		dialErr = err
		return true
	}, waitFor, 10*time.Millisecond, "new connections are still accepted during the drain")
	// A dial racing the close may have been reset in the accept queue.
	assert.True(t, errors.Is(dialErr, syscall.ECONNREFUSED) || errors.Is(dialErr, syscall.ECONNRESET),
		"refused by the kernel, got %v", dialErr)
	accepted := s.Stats().Accepted
	for range 5 {
		_, err := net.DialTimeout("tcp", addr, time.Second)
		assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "refused by the kernel, got %v", err)
	}
	assert.Equal(t, accepted, s.Stats().Accepted, "nothing more reached the server")

	// The busy connection is still served: a ping is answered (after the
	// server's GOAWAY and its PING).
	busy.Push(frame.AppendPing(nil, 42))
	for {
		f, err := busy.Next(waitFor)
		require.NoError(t, err)
		if f.Type != frame.TypeAck && f.Type != frame.TypeGoAway && f.Type != frame.TypePing {
			assert.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: 42}, f)
			break
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a connection had unacknowledged data", err)
	default:
	}
	busy.Push(append(frame.AppendAck(nil, 1), frame.AppendGoAway(nil, frame.CodeShutdown, 1, 0, "")...))
	code, _ := busy.WaitClose(waitFor)
	assert.Equal(t, frame.CodeShutdown, code)
	require.NoError(t, <-done)
}

// With SO_REUSEPORT, Shutdown closes only its own listeners: another server
// of the process sharing the address goes on accepting, whichever started
// first, on a specific address or a wildcard one.
func TestShutdown_ReusePortLeavesOtherListeners(t *testing.T) {
	for _, tc := range []struct {
		name      string
		host      string
		stopFirst bool // shut down the server started first, else the second
	}{
		{name: "loopback, first stops", host: "127.0.0.1", stopFirst: true},
		{name: "loopback, second stops", host: "127.0.0.1"},
		{name: "wildcard, first stops", host: "", stopFirst: true},
		{name: "wildcard, second stops", host: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			cfg := framedCfg()
			cfg.Addr = net.JoinHostPort(tc.host, port)
			cfg.EventLoops = 2
			cfg.ReusePort = true
			a, err := netserver.New(cfg, netserver.Echo{})
			require.NoError(t, err)
			require.NoError(t, a.Start())
			b, err := netserver.New(cfg, netserver.Echo{})
			require.NoError(t, err)
			require.NoError(t, b.Start())
			stop, keep := b, a
			if tc.stopFirst {
				stop, keep = a, b
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(t, stop.Shutdown(ctx))
			defer func() { assert.NoError(t, keep.Shutdown(ctx)) }()
			accepted := keep.Stats().Accepted
			for range 20 {
				c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second)
				require.NoError(t, err, "the other server's listeners were closed too")
				_, err = c.Write(frame.AppendPing(nil, 1))
				require.NoError(t, err)
				require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
				buf := make([]byte, frame.HeaderSize+8)
				_, err = io.ReadFull(c, buf)
				require.NoError(t, err, "served by the server still running")
				c.Close()
			}
			assert.Equal(t, accepted+20, keep.Stats().Accepted)
		})
	}
}

// freePort returns a port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	return port
}

// Without ReusePort an address in use is an error, as a single listener's
// bind would be; the per-loop SO_REUSEPORT listeners must not join it.
func TestStart_AddressInUse(t *testing.T) {
	a := start(t, framedCfg(), nil)
	cfg := framedCfg()
	cfg.Addr = a.Addr().String()
	b, err := netserver.New(cfg, netserver.Echo{})
	require.NoError(t, err)
	err = b.Start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	assert.NoError(t, b.Shutdown(ctx))
}

// Shutdown may be called while Start runs: it waits for Start, then stops
// the server; with no time left it still stops it once Start is done.
func TestShutdown_DuringStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{
		{name: "time to finish", timeout: 5 * time.Second},
		{name: "no time", timeout: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := netserver.New(withAddr(framedCfg()), netserver.Echo{})
			require.NoError(t, err)
			started := make(chan error, 1)
			go func() { started <- s.Start() }()
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			err = s.Shutdown(ctx)
			if tc.timeout > 0 {
				assert.NoError(t, err)
			}
			if err := <-started; err != nil {
				assert.ErrorIs(t, err, netserver.ErrServerClosed, "Shutdown came first")
			}
			select {
			case <-s.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the server kept running after a Shutdown during Start")
			}
		})
	}
}

// Shutdown closes every connection of a loop, however many: idle ones at
// once, busy ones at the deadline, all with the reason shutdown, and each
// peer reads to the end. One loop holds them all, so its slice of open
// connections changes under the walk that closes them.
func TestShutdown_ClosesEveryConnectionOfALoop(t *testing.T) {
	cfg := withAddr(framedCfg())
	cfg.EventLoops = 1
	s, err := netserver.New(cfg, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	const busy, idle = 6, 3
	var conns []*testpeer.Peer
	for i := range busy + idle {
		if i%3 == 2 {
			conns = append(conns, dial(t, s)) // idle: nothing unacknowledged
		} else {
			conns = append(conns, busyConn(t, s))
		}
	}
	require.Eventually(t, func() bool { return s.Stats().Open == busy+idle }, 5*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.Shutdown(ctx), context.DeadlineExceeded, "the busy connections outlive the deadline")
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not stop")
	}
	assert.Zero(t, s.Stats().Open)
	assert.Equal(t, int64(busy+idle), s.Stats().Closed["shutdown"], "closes by reason: %v", s.Stats().Closed)
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := io.Copy(io.Discard, c)
		assert.NoError(t, err, "connection %d: read until the server closed it", i)
	}
}
