package netserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/frame"
	"github.com/netwheel/netwheel/netserver"
)

// busyConn opens a framed connection whose echo stays unacknowledged, so a
// graceful shutdown must wait for it.
func busyConn(t *testing.T, s *netserver.Server) *client {
	t.Helper()
	busy := dial(t, s)
	busy.write(frame.AppendData(nil, 1, []byte("unacked")))
	for {
		f, err := busy.next(2 * time.Second)
		require.NoError(t, err)
		if f.Type == frame.TypeData {
			return busy
		}
	}
}

func TestShutdown_DeadlineCutsBusyConnections(t *testing.T) {
	s, err := netserver.New(withAddr(framedCfg()), netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	busyConn(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	assert.ErrorIs(t, s.Shutdown(ctx), context.DeadlineExceeded)
	// Every wait in Shutdown is bounded by ctx: it returns at the deadline,
	// not after the engine has stopped.
	assert.Less(t, time.Since(began), 200*time.Millisecond+150*time.Millisecond)
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not stop after the deadline cut its connections")
	}
	assert.Zero(t, s.Stats().Open)
	assert.Equal(t, int64(1), s.Stats().Closed["shutdown"])
	assert.NoError(t, s.Err())
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
	}, 3*time.Second, 10*time.Millisecond, "new connections are still accepted during the drain")
	// A dial racing the close may have been reset in the accept queue.
	assert.True(t, errors.Is(dialErr, syscall.ECONNREFUSED) || errors.Is(dialErr, syscall.ECONNRESET),
		"refused by the kernel, got %v", dialErr)
	accepted := s.Stats().Accepted
	for range 5 {
		_, err := net.DialTimeout("tcp", addr, time.Second)
		assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "refused by the kernel, got %v", err)
	}
	assert.Equal(t, accepted, s.Stats().Accepted, "nothing more reached the server")

	// The busy connection is still served: a ping is answered.
	busy.write(frame.AppendPing(nil, 42))
	for {
		f, err := busy.next(2 * time.Second)
		require.NoError(t, err)
		if f.Type != frame.TypeAck {
			assert.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: 42}, f)
			break
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a connection had unacknowledged data", err)
	default:
	}
	busy.write(frame.AppendAck(nil, 1))
	code, _ := busy.waitClose(2 * time.Second)
	assert.Equal(t, frame.CodeShutdown, code)
	require.NoError(t, <-done)
}

// With SO_REUSEPORT, Shutdown closes only its own listeners: a second server
// of the process sharing the address goes on accepting.
func TestShutdown_ReusePortLeavesOtherListeners(t *testing.T) {
	first := withAddr(framedCfg())
	first.ReusePort = true
	a, err := netserver.New(first, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, a.Start())
	second := first
	second.Addr = a.Addr().String()
	b := start(t, second, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, a.Shutdown(ctx))
	for range 20 {
		c, err := net.DialTimeout("tcp", second.Addr, time.Second)
		require.NoError(t, err, "the other server's listener was closed too")
		_, err = c.Write(frame.AppendPing(nil, 1))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
		buf := make([]byte, frame.HeaderSize+8)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err, "served by the server still running")
		c.Close()
	}
	assert.Equal(t, int64(20), b.Stats().Accepted)
}

// MetricsHandler serves the server's metrics when a custom Registerer is
// given too (it served the default registry then).
func TestMetricsHandler_WithCustomRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := framedCfg()
	cfg.Registerer = reg
	s := start(t, cfg, nil)
	dial(t, s).write(frame.AppendPing(nil, 1))
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.Contains(t, rec.Body.String(), "netwheel_connections_accepted_total")
	assert.Contains(t, rec.Body.String(), "go_goroutines")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	assert.Contains(t, strings.Join(names, " "), "netwheel_connections_accepted_total", "the custom registry has them too")
}

// Stats and the metrics may be read from other goroutines while Start runs
// (the race detector fails this test if the wheel is shared unsafely).
func TestStatsDuringStart(t *testing.T) {
	s, err := netserver.New(withAddr(framedCfg()), netserver.Echo{})
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = s.Stats()
			s.MetricsHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
		}
	}()
	require.NoError(t, s.Start())
	time.Sleep(20 * time.Millisecond) // let the reader overlap the running server too
	close(stop)
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
}
