package idle

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// CloseError is what a wrapped Conn's Read and Write return once its Tracker
// has closed it: errors.Is matches both the Reason (idle.ReasonIdle, ...) and
// the underlying error (usually net.ErrClosed or os.ErrDeadlineExceeded). It
// is a net.Error whose Timeout reports true.
type CloseError struct {
	Reason Reason
	Err    error // what the underlying conn returned
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("idle: connection closed (%s): %v", e.Reason, e.Err)
}

// Unwrap returns the reason and the underlying error.
func (e *CloseError) Unwrap() []error { return []error{e.Reason, e.Err} }

// Timeout reports true: the connection was closed by a timeout.
func (e *CloseError) Timeout() bool { return true }

// Temporary reports false (see net.Error).
func (e *CloseError) Temporary() bool { return false }

var _ net.Error = (*CloseError)(nil)

// Conn is a net.Conn whose idle, read-silence, handshake, max-age and
// write-stall timeouts are enforced by a Tracker on a shared wheel: a
// cheaper replacement for calling SetReadDeadline before every Read in a
// goroutine-per-connection server. Read and Write mark activity (Read also
// marks inbound bytes; with a WriteStallTimeout, Write arms the write-stall
// deadline for as long as it blocks). When a timeout fires the underlying
// conn is closed, so a blocked Read or Write returns at once, and every Read
// and Write from then on returns a *CloseError carrying the Reason.
//
// Read and Write may be called from different goroutines, as on any
// net.Conn; concurrent Writes share one write-stall deadline, armed by
// whichever starts first and cleared by whichever finishes first.
//
// Ownership: the Conn's fields are written by WrapConn and only read after;
// the Tracker keeps its own rules.
type Conn struct {
	net.Conn
	t     Tracker
	stall bool // WriteStallTimeout is set
}

// WrapConn starts tracking c with cfg on w and returns the wrapper. cfg is
// validated as by New; it may not set KeepaliveTime (a plain net.Conn has no
// probe to send: use TCP keepalive, net.TCPConn.SetKeepAliveConfig) nor
// FrameTimeout (the wrapper knows no frames), which give ErrKeepalive and
// ErrNoEffect. A HandshakeTimeout runs until Tracker().HandshakeDone is
// called. Close the Conn to stop tracking it. May be called from any
// goroutine.
func WrapConn(c net.Conn, w *wheel.Wheel, cfg Config) (*Conn, error) {
	if err := checkConnConfig(&cfg); err != nil {
		return nil, err
	}
	return wrap(c, w, &cfg), nil
}

func checkConnConfig(cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.KeepaliveTime != 0 {
		return fmt.Errorf("%w: a wrapped net.Conn cannot send probes; use TCP keepalive", ErrKeepalive)
	}
	if cfg.FrameTimeout != 0 {
		return fmt.Errorf("%w: FrameTimeout on a wrapped net.Conn, which knows no frames", ErrNoEffect)
	}
	return nil
}

func wrap(c net.Conn, w *wheel.Wheel, cfg *Config) *Conn {
	if w == nil {
		panic("idle: WrapConn with nil wheel")
	}
	wc := &Conn{Conn: c, stall: cfg.WriteStallTimeout > 0}
	wc.t.start(w, cfg, Hooks{Close: wc.expire}, int64(w.Now()))
	return wc
}

// expire closes the underlying conn; it runs on the wheel's goroutine. The
// deadline in the past first makes a blocked Read or Write return and keeps
// Close from blocking (a tls.Conn writes an alert on Close).
func (c *Conn) expire(Reason) {
	_ = c.Conn.SetDeadline(time.Unix(1, 0))
	_ = c.Conn.Close()
}

// Tracker returns the Conn's tracker, for HandshakeDone or Reason. Do not
// Stop it: Close the Conn.
func (c *Conn) Tracker() *Tracker { return &c.t }

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

func (c *Conn) wrapErr(err error) error {
	if r := c.t.Reason(); r != ReasonNone {
		var ce *CloseError
		if !errors.As(err, &ce) {
			return &CloseError{Reason: r, Err: err}
		}
	}
	return err
}

// Close stops tracking and closes the underlying conn.
func (c *Conn) Close() error {
	c.t.Stop()
	return c.Conn.Close()
}

// Listener wraps every accepted conn in a Conn tracked on one wheel.
//
// Ownership: fields are written by WrapListener and only read after.
type Listener struct {
	net.Listener
	w   *wheel.Wheel
	cfg Config
}

// WrapListener returns a listener whose Accept wraps each conn as WrapConn
// would, with the same configuration rules; cfg is validated once, here.
// Closing the listener does not close the conns it accepted.
func WrapListener(ln net.Listener, w *wheel.Wheel, cfg Config) (*Listener, error) {
	if w == nil {
		panic("idle: WrapListener with nil wheel")
	}
	if err := checkConnConfig(&cfg); err != nil {
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
