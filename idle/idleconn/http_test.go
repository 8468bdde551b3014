package idleconn_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/idle/idleconn"
	"github.com/netwheel/netwheel/wheel"
)

// httpsServer is net/http serving TLS over idleconn.WrapListener on a manual
// clock, with the wrapper below TLS.
type httpsServer struct {
	clk    *wheel.ManualClock
	addr   string
	roots  *x509.CertPool
	conns  chan *idleconn.Conn // each accepted connection's wrapper
	closed chan *idleconn.Conn // each closed connection's wrapper
}

// startHTTPS starts the server; mark selects idleconn.NewTLSListener (which
// marks handshakes) rather than tls.NewListener (which does not).
func startHTTPS(t *testing.T, cfg idle.Config, mark bool) *httpsServer {
	t.Helper()
	s := &httpsServer{clk: wheel.NewManualClock(), conns: make(chan *idleconn.Conn, 8), closed: make(chan *idleconn.Conn, 8)}
	w := wheel.New(wheel.WithClock(s.clk))
	t.Cleanup(w.Stop)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.addr = raw.Addr().String()
	ln, err := idleconn.WrapListener(raw, w, cfg)
	require.NoError(t, err)
	cert, roots, err := selfSigned()
	require.NoError(t, err)
	s.roots = roots
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	var tlsLn net.Listener
	if mark {
		tlsLn = idleconn.NewTLSListener(ln, tlsCfg)
	} else {
		tlsLn = tls.NewListener(ln, tlsCfg)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "%s, TLS: %v", r.Proto, r.TLS != nil)
		}),
		ConnState: func(c net.Conn, state http.ConnState) {
			// net/http sees a *tls.Conn, and the wrapper under it.
			tc, ok := c.(*tls.Conn)
			if !assert.True(t, ok, "net/http sees %T", c) {
				return
			}
			ic, ok := tc.NetConn().(*idleconn.Conn)
			if !assert.True(t, ok, "under TLS is %T", tc.NetConn()) {
				return
			}
			switch state {
			case http.StateNew:
				s.conns <- ic
			case http.StateClosed:
				s.closed <- ic
			}
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tlsLn) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		assert.ErrorIs(t, waitErr(t, served), http.ErrServerClosed)
	})
	return s
}

func (s *httpsServer) accepted(t *testing.T) *idleconn.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

func (s *httpsServer) waitClosed(t *testing.T, c *idleconn.Conn) {
	t.Helper()
	for {
		select {
		case got := <-s.closed:
			if got == c {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("connection not closed")
		}
	}
}

// TestNewTLSListener_HTTP2 serves net/http behind the wrapper to net/http's
// own HTTP/2 client: the request sees TLS, HTTP/2 is negotiated, the
// handshake is marked, the connection under TLS is the wrapper around the
// *net.TCPConn with the interfaces io.Copy and net/http look for, and the
// idle timeout reaps the kept-alive connection: the client reads EOF.
func TestNewTLSListener_HTTP2(t *testing.T) {
	const idleTimeout = 30 * time.Second
	s := startHTTPS(t, only(idle.Config{HandshakeTimeout: 5 * time.Second, IdleTimeout: idleTimeout}), true)
	clientEOF := make(chan error, 1)
	tlsCfg := &tls.Config{RootCAs: s.roots, ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"}}
	tr := &http.Transport{
		ForceAttemptHTTP2: true,
		// The client's TCP conn says when it reads EOF; TLS goes above it,
		// so that the Transport gets a *tls.Conn and speaks HTTP/2.
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(eofConn{raw, clientEOF}, tlsCfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return tc, nil
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	resp, err := client.Get("https://" + s.addr)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2, resp.ProtoMajor)
	require.NotNil(t, resp.TLS)
	assert.Equal(t, "h2", resp.TLS.NegotiatedProtocol)
	assert.Equal(t, "HTTP/2.0, TLS: true", string(body), "the handler's view")

	c := s.accepted(t)
	assert.False(t, c.HandshakePending(), "the handshake is marked")
	_, ok := c.NetConn().(*net.TCPConn)
	assert.True(t, ok, "the wrapper is right above TCP")
	var conn net.Conn = c
	for name, ok := range map[string]bool{
		"io.ReaderFrom": is[io.ReaderFrom](conn),
		"io.WriterTo":   is[io.WriterTo](conn),
		"syscall.Conn":  is[syscall.Conn](conn),
		"CloseWrite":    is[interface{ CloseWrite() error }](conn),
		"CloseRead":     is[interface{ CloseRead() error }](conn),
		"SetKeepAlive":  is[interface{ SetKeepAlive(bool) error }](conn),
		"NetConn":       is[interface{ NetConn() net.Conn }](conn),
	} {
		assert.True(t, ok, name)
	}
	_, err = c.SyscallConn()
	assert.NoError(t, err)

	// The kept-alive connection idles out, and only then does the client
	// see it end.
	select {
	case err := <-clientEOF:
		t.Fatalf("the client saw the connection end before the idle timeout: %v", err)
	default:
	}
	// The client may still send a frame after the response (a SETTINGS
	// ack, a WINDOW_UPDATE), which moves the deadline, so the clock goes a
	// second at a time until the tracker closes, and never early.
	// The activity read before the last step bounds the one the tracker
	// went by (stamps only move forward); the close itself makes more.
	s.clk.Advance(idleTimeout - time.Second)
	lastSeen := c.LastActivity()
	for step := 0; c.Tracker().Reason() == idle.ReasonNone; step++ {
		require.Less(t, step, int(idleTimeout/time.Second), "the connection never idled out")
		lastSeen = c.LastActivity()
		s.clk.Advance(time.Second)
	}
	require.Equal(t, idle.ReasonIdle, c.Tracker().Reason())
	require.GreaterOrEqual(t, s.clk.Now()-lastSeen, idleTimeout, "closed before the idle timeout")
	s.waitClosed(t, c)
	select {
	case err := <-clientEOF:
		t.Logf("the client reads: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not see the close")
	}
}

// eofConn sends on eof how the client first learns that the connection is
// over: the first error a Read returns, or, when TLS read the server's
// close_notify alert (so no Read of the TCP conn fails), the client
// closing the TCP conn in response.
type eofConn struct {
	net.Conn
	eof chan<- error
}

func (c eofConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.report(err)
	}
	return n, err
}

func (c eofConn) Close() error {
	c.report(errors.New("the client closed the connection"))
	return c.Conn.Close()
}

func (c eofConn) report(err error) {
	select {
	case c.eof <- err:
	default:
	}
}

// TestNewTLSListener_Handshake runs the handshake timeout against clients
// that are slow after their handshake, and one that never sends a
// ClientHello: NewTLSListener clears the timeout once the handshake is
// through, so only the silent client is closed; tls.NewListener, which
// marks nothing, lets the timeout close the slow client too.
func TestNewTLSListener_Handshake(t *testing.T) {
	const handshake = 5 * time.Second
	for _, tc := range []struct {
		name  string
		mark  bool // idleconn.NewTLSListener, not tls.NewListener
		hello bool // the client runs the TLS handshake
		want  idle.Reason
	}{
		{name: "slow request after the handshake", mark: true, hello: true, want: idle.ReasonNone},
		{name: "no ClientHello", mark: true, hello: false, want: idle.ReasonHandshake},
		{name: "tls.NewListener: never marked", mark: false, hello: true, want: idle.ReasonHandshake},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startHTTPS(t, only(idle.Config{HandshakeTimeout: handshake, IdleTimeout: time.Minute}), tc.mark)
			var conn net.Conn
			var err error
			if tc.hello {
				conn, err = tls.Dial("tcp", s.addr, &tls.Config{RootCAs: s.roots, NextProtos: []string{"http/1.1"}})
			} else {
				conn, err = net.Dial("tcp", s.addr)
			}
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
			c := s.accepted(t)
			if tc.mark && tc.hello {
				// The client's handshake may return before the server's.
				require.Eventually(t, func() bool { return !c.HandshakePending() },
					10*time.Second, time.Millisecond)
			}
			if tc.hello {
				_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n") // half a request
				require.NoError(t, err)
			}
			s.clk.Advance(2 * handshake)
			assert.Equal(t, tc.want, c.Tracker().Reason())

			if tc.want != idle.ReasonNone {
				s.waitClosed(t, c)
				if !tc.hello {
					_, err = conn.Read(make([]byte, 1))
					assert.ErrorIs(t, err, io.EOF)
				}
				return
			}
			_, err = io.WriteString(conn, "\r\n") // the rest
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			body, err := io.ReadAll(io.LimitReader(resp.Body, 100))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "HTTP/1.1, TLS: true", string(body))
		})
	}
}

// TestNewTLSListener_Config keeps the caller's configuration working:
// GetConfigForClient's result is used, VerifyConnection is called and can
// refuse a client (and then nothing is marked), and a session resumed with
// a ticket from an earlier connection is marked too.
func TestNewTLSListener_Config(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	t.Cleanup(w.Stop)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln, err := idleconn.WrapListener(raw, w, only(idle.Config{HandshakeTimeout: time.Minute}))
	require.NoError(t, err)
	cert, roots, err := selfSigned()
	require.NoError(t, err)
	refuse := errors.New("refused")
	var verified int
	inner := &tls.Config{
		Certificates: []tls.Certificate{cert}, // only here
		VerifyConnection: func(cs tls.ConnectionState) error {
			verified++ // one handshake at a time
			if cs.ServerName == "refuse.test" {
				return refuse
			}
			return nil
		},
	}
	tlsLn := idleconn.NewTLSListener(ln, &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return inner, nil },
	})
	t.Cleanup(func() { tlsLn.Close() })

	clientCfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	// handshake dials, handshakes on both ends, and returns the server's
	// wrapper and whether the client resumed a session.
	handshake := func(serverName string) (*idleconn.Conn, bool, error) {
		type result struct {
			c   *tls.Conn
			err error
		}
		accepted := make(chan result, 1)
		go func() {
			c, err := tlsLn.Accept()
			if !assert.NoError(t, err) {
				accepted <- result{err: err}
				return
			}
			sc := c.(*tls.Conn)
			accepted <- result{sc, sc.Handshake()}
		}()
		cfg := clientCfg.Clone()
		if serverName != "" {
			cfg.ServerName = serverName
			cfg.InsecureSkipVerify = true
		}
		cc, err := tls.Dial("tcp", raw.Addr().String(), cfg)
		r := <-accepted
		require.NotNil(t, r.c)
		t.Cleanup(func() { r.c.Close() })
		c := r.c.NetConn().(*idleconn.Conn)
		if err != nil || r.err != nil {
			return c, false, errors.Join(err, r.err)
		}
		t.Cleanup(func() { cc.Close() })
		// TLS 1.3 tickets come after the handshake: let the client read them.
		_, err = r.c.Write([]byte("x"))
		require.NoError(t, err)
		_, err = io.ReadFull(cc, make([]byte, 1))
		require.NoError(t, err)
		return c, cc.ConnectionState().DidResume, nil
	}

	c, resumed, err := handshake("")
	require.NoError(t, err)
	assert.False(t, resumed)
	assert.False(t, c.HandshakePending(), "marked")
	assert.Equal(t, 1, verified)

	c, resumed, err = handshake("")
	require.NoError(t, err)
	assert.True(t, resumed, "the ticket from the first connection")
	assert.False(t, c.HandshakePending(), "a resumed handshake is marked")
	assert.Equal(t, 2, verified)

	c, _, err = handshake("refuse.test")
	require.ErrorIs(t, err, refuse)
	assert.True(t, c.HandshakePending(), "a refused client is not marked")
	assert.Equal(t, 3, verified)
}

// is reports whether v implements T.
func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}
