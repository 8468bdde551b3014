package idleconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// CloseError is what a wrapped Conn's Read, Write, ReadFrom and WriteTo
// return once its idle.Tracker has closed it. errors.Is matches the Reason
// (idle.ReasonIdle, ...), net.ErrClosed (the Tracker closed the connection,
// whatever the underlying conn said) and the underlying error; it never
// matches os.ErrDeadlineExceeded, which promises that a call may be retried
// after the deadline is moved: the past deadline the close sets to wake
// blocked calls is reported as net.ErrClosed.
//
// CloseError is a net.Error whose Timeout reports whether a timeout is what
// closed the connection (see Timeout).
type CloseError struct {
	Reason idle.Reason
	Err    error // what the underlying conn returned
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("idleconn: connection closed (%s): %v", e.Reason, e.Err)
}

// Unwrap returns the reason, net.ErrClosed and the underlying error.
func (e *CloseError) Unwrap() []error { return []error{e.Reason, net.ErrClosed, e.Err} }

// Timeout reports whether a timeout closed the connection
// (idle.Reason.Timeout: max age is not one). It names the cause, not a
// chance to retry: the connection is closed either way, and every later
// call fails; a loop that retries on timeouts should also stop on
// errors.Is(err, net.ErrClosed).
func (e *CloseError) Timeout() bool { return e.Reason.Timeout() }

// Temporary reports false (see net.Error).
func (e *CloseError) Temporary() bool { return false }

var _ net.Error = (*CloseError)(nil)

// Conn is a net.Conn whose idle, read-silence, handshake, max-age and
// write-stall timeouts are enforced by an idle.Tracker on a shared wheel: a
// cheaper replacement for calling SetReadDeadline before every Read in a
// goroutine-per-connection server. Read and Write mark activity (Read also
// marks inbound bytes; with a WriteStallTimeout, Write arms the write-stall
// deadline for as long as it blocks). When a timeout fires the underlying
// conn is closed, so a blocked call returns at once, and every call from
// then on returns a *CloseError carrying the Reason.
//
// Conn keeps the interfaces that io.Copy, net/http and the os package look
// for, whatever conn it wraps: io.ReaderFrom and io.WriterTo, which keep
// the kernel's zero-copy paths (see ReadFrom and WriteTo), syscall.Conn,
// CloseRead and CloseWrite, and the TCP settings SetKeepAlive,
// SetKeepAlivePeriod, SetKeepAliveConfig, SetNoDelay and SetLinger. A method
// the wrapped conn lacks returns an error matching errors.ErrUnsupported
// (ReadFrom and WriteTo fall back to a copy through Read and Write).
// NetConn returns the wrapped conn for anything else; bytes moved through it
// directly, or through SyscallConn's callbacks, are not seen by the Tracker.
//
// Read and WriteTo belong to the connection's reader, Write and ReadFrom
// to its writer. As on any net.Conn, the reader and the writer may be
// different goroutines; concurrent writers share one write-stall deadline,
// armed by whichever starts first and cleared by whichever finishes first.
// The other methods may be called from any goroutine.
type Conn struct {
	// Written by WrapConn and only read afterwards; t keeps its own rules
	// (see Tracker's fields).
	net.Conn
	t     idle.Tracker
	stall bool // WriteStallTimeout is set
}

// WrapConn starts tracking c with cfg on w and returns the wrapper. cfg is
// validated as by idle.NewTracker; it may not set KeepaliveTime (a plain
// net.Conn has no probe to send: use TCP keepalive,
// Conn.SetKeepAliveConfig) nor FrameTimeout (the wrapper knows no frames),
// which give idle.ErrKeepalive and idle.ErrNoEffect. The idle, max-age and write-stall defaults apply (see
// idle.Config); the keepalive, frame and handshake ones do not. A
// HandshakeTimeout, when set, runs until Tracker().HandshakeDone is
// called: after tls.Conn.Handshake returns, say (see NewTLSListener for
// net/http). Close the Conn to stop tracking it. May be called from any
// goroutine.
func WrapConn(c net.Conn, w *wheel.Wheel, cfg idle.Config) (*Conn, error) {
	if w == nil {
		panic("idleconn: WrapConn with nil wheel")
	}
	if err := checkConnConfig(&cfg, w.Tick()); err != nil {
		return nil, err
	}
	return wrap(c, w, &cfg), nil
}

// checkConnConfig validates cfg for a wrapped Conn on a wheel of that tick
// and resolves it: no keepalive, frame or handshake default applies, the
// last two Off when unset, so that Tracker.Init takes the result as it is.
func checkConnConfig(cfg *idle.Config, tick time.Duration) error {
	if cfg.KeepaliveTime > 0 {
		return fmt.Errorf("%w: a wrapped net.Conn cannot send probes; use TCP keepalive", idle.ErrKeepalive)
	}
	if cfg.FrameTimeout > 0 {
		return fmt.Errorf("%w: FrameTimeout on a wrapped net.Conn, which knows no frames", idle.ErrNoEffect)
	}
	for _, p := range []*time.Duration{&cfg.FrameTimeout, &cfg.HandshakeTimeout} {
		if *p == 0 {
			*p = idle.Off
		}
	}
	r, err := cfg.WithDefaults(idle.Uses{Tick: tick})
	if err != nil {
		return err
	}
	*cfg = r
	return nil
}

// wrap starts tracking c with cfg, resolved by checkConnConfig.
func wrap(c net.Conn, w *wheel.Wheel, cfg *idle.Config) *Conn {
	wc := &Conn{Conn: c, stall: cfg.WriteStallTimeout > 0}
	if err := wc.t.Init(w, w.Now(), *cfg, idle.Hooks{Close: wc.expire}); err != nil {
		panic("idleconn: a resolved config refused: " + err.Error())
	}
	return wc
}

// expire closes the underlying conn; it runs on the wheel's goroutine and
// must not block. The deadline in the past makes a blocked call return. A
// tls.Conn would write a close_notify alert on Close, under a deadline of
// its own of 5 s, to a peer that may not read: its transport is closed
// first, so that the alert fails at once. A lingering close is undone
// first (unlinger, SetLinger).
func (c *Conn) expire(idle.Reason) {
	_ = c.Conn.SetDeadline(time.Unix(1, 0))
	if tc, ok := c.Conn.(*tls.Conn); ok {
		transport := tc.NetConn()
		unlinger(transport)
		_ = transport.Close()
	} else {
		unlinger(c.Conn)
	}
	_ = c.Conn.Close()
}

// unlinger makes nc's Close return at once: a socket that lingers (or
// may: see lingerOff) is set back to SetLinger(-1), the system's default.
func unlinger(nc net.Conn) {
	l, ok := nc.(interface{ SetLinger(sec int) error })
	if !ok || lingerOff(nc) {
		return
	}
	_ = l.SetLinger(-1)
}

// Tracker returns the Conn's tracker, for HandshakeDone or Reason. Do not
// Stop it: Close the Conn.
func (c *Conn) Tracker() *idle.Tracker { return &c.t }

// NetConn returns the wrapped conn, as tls.Conn.NetConn does. Reads and
// writes made on it directly are not tracked. Any goroutine.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Read reads from the underlying conn and marks inbound bytes and activity.
// After a timeout it returns a *CloseError.
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.t.Received()
	}
	if err != nil {
		err = c.wrapErr(err)
	}
	return n, err
}

// Write writes to the underlying conn and marks activity; with a
// WriteStallTimeout, the write-stall deadline runs while it blocks. After a
// timeout it returns a *CloseError.
func (c *Conn) Write(b []byte) (int, error) {
	if c.stall {
		c.t.Written()
	}
	n, err := c.Conn.Write(b)
	if c.stall {
		c.t.Drained()
	}
	if n > 0 {
		c.t.Activity()
	}
	if err != nil {
		err = c.wrapErr(err)
	}
	return n, err
}

// wrapErr turns err, if not nil, into a *CloseError if the Tracker has
// closed the connection, unless it is one already.
func (c *Conn) wrapErr(err error) error {
	r := c.t.Reason()
	if err == nil || r == idle.ReasonNone {
		return err
	}
	var ce *CloseError
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The past deadline set by expire, not one to move and retry.
		var oe *net.OpError
		if errors.As(err, &oe) {
			cp := *oe
			cp.Err = net.ErrClosed
			err = &cp
		} else {
			err = net.ErrClosed
		}
	}
	return &CloseError{Reason: r, Err: err}
}

// Close stops tracking and closes the underlying conn.
func (c *Conn) Close() error {
	c.t.Stop()
	return c.Conn.Close()
}

// unsupported is the error of a method the wrapped conn lacks.
func (c *Conn) unsupported(method string) error {
	return fmt.Errorf("idleconn: wrapped %T has no %s: %w", c.Conn, method, errors.ErrUnsupported)
}

// pass calls f with the wrapped conn if it has method, as interface I, or
// returns the unsupported error.
func pass[I any](c *Conn, method string, f func(I) error) error {
	if k, ok := c.Conn.(I); ok {
		return f(k)
	}
	return c.unsupported(method)
}

// CloseWrite shuts down the writing side of the wrapped conn (a
// *net.TCPConn sends a FIN; a *tls.Conn sends close_notify), as net/http does
// before it closes a connection. It does not stop tracking. It returns an
// error matching errors.ErrUnsupported if the wrapped conn has no
// CloseWrite. Any goroutine.
func (c *Conn) CloseWrite() error {
	return pass(c, "CloseWrite", func(k interface{ CloseWrite() error }) error { return k.CloseWrite() })
}

// CloseRead shuts down the reading side of the wrapped conn, as
// net.TCPConn.CloseRead does; it does not stop tracking. It returns an
// error matching errors.ErrUnsupported if the wrapped conn has no
// CloseRead. Any goroutine.
func (c *Conn) CloseRead() error {
	return pass(c, "CloseRead", func(k interface{ CloseRead() error }) error { return k.CloseRead() })
}

// SyscallConn returns the wrapped conn's raw connection (see syscall.Conn),
// or an error matching errors.ErrUnsupported if it has none. Bytes that the
// RawConn's Read and Write callbacks move are not tracked. The RawConn
// offers only Control, Read and Write: it hides what the os and net
// packages use to move bytes with splice or sendfile straight to or from
// its descriptor, so that such copies come through ReadFrom and WriteTo and
// are tracked. Any goroutine.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, c.unsupported("SyscallConn")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return rawConn{rc}, nil
}

// rawConn hides the methods of a net or os RawConn beyond syscall.RawConn.
type rawConn struct{ rc syscall.RawConn }

func (r rawConn) Control(f func(fd uintptr)) error           { return r.rc.Control(f) }
func (r rawConn) Read(f func(fd uintptr) (done bool)) error  { return r.rc.Read(f) }
func (r rawConn) Write(f func(fd uintptr) (done bool)) error { return r.rc.Write(f) }

// SetKeepAlive sets whether the operating system sends TCP keepalive
// probes, as net.TCPConn.SetKeepAlive does; an error matching
// errors.ErrUnsupported if the wrapped conn cannot. Any goroutine.
func (c *Conn) SetKeepAlive(keepalive bool) error {
	return pass(c, "SetKeepAlive", func(k interface{ SetKeepAlive(bool) error }) error { return k.SetKeepAlive(keepalive) })
}

// SetKeepAlivePeriod sets the TCP keepalive idle time and interval, as
// net.TCPConn.SetKeepAlivePeriod does; an error matching
// errors.ErrUnsupported if the wrapped conn cannot. Any goroutine.
func (c *Conn) SetKeepAlivePeriod(d time.Duration) error {
	return pass(c, "SetKeepAlivePeriod", func(k interface{ SetKeepAlivePeriod(time.Duration) error }) error {
		return k.SetKeepAlivePeriod(d)
	})
}

// SetKeepAliveConfig configures TCP keepalive, as
// net.TCPConn.SetKeepAliveConfig does: the way to detect a dead peer on a
// wrapped conn, which cannot send probes of its own (WrapConn rejects
// KeepaliveTime). An error matching errors.ErrUnsupported if the wrapped
// conn cannot. Any goroutine.
func (c *Conn) SetKeepAliveConfig(config net.KeepAliveConfig) error {
	return pass(c, "SetKeepAliveConfig", func(k interface {
		SetKeepAliveConfig(net.KeepAliveConfig) error
	}) error {
		return k.SetKeepAliveConfig(config)
	})
}

// SetNoDelay sets TCP_NODELAY, as net.TCPConn.SetNoDelay does; an error
// matching errors.ErrUnsupported if the wrapped conn cannot. Any goroutine.
func (c *Conn) SetNoDelay(noDelay bool) error {
	return pass(c, "SetNoDelay", func(k interface{ SetNoDelay(bool) error }) error { return k.SetNoDelay(noDelay) })
}

// SetLinger sets how Close treats unsent data, as net.TCPConn.SetLinger
// does; an error matching errors.ErrUnsupported if the wrapped conn cannot.
// Any goroutine.
//
// The linger applies to Close. A timeout's close, on the wheel's goroutine,
// must not wait for a peer that stalled the writes: it first sets a
// positive linger, set here or on the wrapped conn directly, back to the
// system's default (SetLinger(-1)), so that the system sends the unsent
// data in the background. A linger of 0 (discard unsent data and reset the
// connection) is kept on Unix; elsewhere it too is set back to the default.
func (c *Conn) SetLinger(sec int) error {
	return pass(c, "SetLinger", func(k interface{ SetLinger(int) error }) error { return k.SetLinger(sec) })
}

// Listener wraps every accepted conn in a Conn tracked on one wheel. Its
// methods may be called from any goroutine, as the wrapped listener's.
type Listener struct {
	// Written by WrapListener and only read afterwards.
	net.Listener
	w   *wheel.Wheel
	cfg idle.Config // validated and resolved
}

// WrapListener returns a listener whose Accept wraps each conn as WrapConn
// would, with the same configuration rules; cfg is validated once, here.
// Closing the listener does not close the conns it accepted.
//
// With TLS, put the wrapper below it: wrap the TCP listener, then serve
// TLS over the result with NewTLSListener, which also marks each
// connection's handshake done (tls.NewListener would not, so a
// HandshakeTimeout would close every connection). The wrapper then counts
// TLS records as they cross the socket: handshake messages, alerts and
// HTTP/2 PINGs count as activity.
//
// Above TLS (WrapListener(tls.NewListener(...))), net/http sees a *Conn and
// not a *tls.Conn: Request.TLS is nil, HTTP/2 is never served (and "h2"
// must then stay out of NextProtos, or a client that picks it gets no
// answer it understands), the handshake runs on the first Read without
// net/http's handshake timeout, nothing marks it done unless the server
// calls HandshakeDone itself, ReadFrom and WriteTo copy through Read and
// Write, and a timeout's close sends no close_notify. It suits only a
// server of its own that wants activity to mean plaintext bytes.
func WrapListener(ln net.Listener, w *wheel.Wheel, cfg idle.Config) (*Listener, error) {
	if w == nil {
		panic("idleconn: WrapListener with nil wheel")
	}
	if err := checkConnConfig(&cfg, w.Tick()); err != nil {
		return nil, err
	}
	return &Listener{Listener: ln, w: w, cfg: cfg}, nil
}

// Accept waits for the next connection and returns it as a *Conn.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrap(c, l.w, &l.cfg), nil
}
