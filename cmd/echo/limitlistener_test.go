package main

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/netwheel/netwheel/netserver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// acceptOne runs l.Accept in a goroutine and returns its results.
func acceptOne(l net.Listener) chan net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(got)
			return
		}
		got <- c
	}()
	return got
}

// accepted waits for acceptOne's connection, failing with msg if none
// comes within 5 s.
func accepted(t *testing.T, got chan net.Conn, msg string) net.Conn {
	t.Helper()
	select {
	case c := <-got:
		require.NotNil(t, c, msg)
		return c
	case <-time.After(5 * time.Second):
		t.Fatal(msg)
		return nil
	}
}

// notAccepted fails with msg if acceptOne's Accept returns within 100 ms.
func notAccepted(t *testing.T, got chan net.Conn, msg string) {
	t.Helper()
	select {
	case c := <-got:
		t.Fatalf("%s: %v", msg, c)
	case <-time.After(100 * time.Millisecond):
	}
}

// A limitListener holds at most its limit of connections open: the next
// waits, in the kernel's queue, until one of them closes.
func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(ln, 2)
	defer l.Close()

	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	var open []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
	}
	for range 2 {
		open = append(open, accepted(t, acceptOne(l), "Accept below the limit did not return"))
	}
	third := acceptOne(l)
	notAccepted(t, third, "a third connection was accepted over the limit of 2")
	require.NoError(t, open[0].Close())
	_ = open[0].Close() // a second Close gives no second place back
	open[0] = accepted(t, third, "a freed place was not taken")
	fourth := acceptOne(l)
	notAccepted(t, fourth, "a double Close freed two places")
	require.NoError(t, l.Close())
	select {
	case c, ok := <-fourth:
		assert.False(t, ok, "Close ends a waiting Accept with an error, not a connection: %v", c)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Accept")
	}
	for _, c := range open {
		c.Close()
	}
}

// The metrics server bounds every phase of a connection: a request's
// headers and whole body (a body announced and never sent would hold the
// connection while the server discards it), an idle keep-alive, and
// writing a response to a scraper that does not read, with -pprof too
// (net/http/pprof extends the write deadline by the seconds a profile
// asks for).
func TestMetricsServer_Bounded(t *testing.T) {
	srv, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0"}, netserver.Echo{})
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	for _, pprof := range []bool{false, true} {
		hs := metricsServer(srv, options{pprof: pprof}, log)
		assert.Positive(t, hs.ReadHeaderTimeout, "pprof %v", pprof)
		assert.Positive(t, hs.ReadTimeout, "pprof %v", pprof)
		assert.Positive(t, hs.IdleTimeout, "pprof %v", pprof)
		assert.Positive(t, hs.WriteTimeout, "pprof %v", pprof)
	}
}
