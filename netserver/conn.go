package netserver

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver/frame"
)

// Errors returned by Send; test them with errors.Is.
var (
	// ErrClosed: the connection is closing or closed.
	ErrClosed = errors.New("netserver: connection closed")
	// ErrOutputLimit: the message would take the connection's queued output
	// over Limits.OutputHard. The connection is closing with
	// ReasonOutputLimit when Send returns it.
	ErrOutputLimit = errors.New("netserver: output limit")
	// ErrUnackedLimit: the peer has too much unacknowledged data, in bytes
	// (Limits.UnackedBytes) or messages (retransmit.Config.Window); the
	// message was not sent. The handler decides: Echo closes with
	// ReasonUnackedLimit rather than drop an echo.
	ErrUnackedLimit = errors.New("netserver: unacknowledged data limit")
)

// Conn is one connection of a Server. Its methods must be called on the
// connection's event loop, that is from the handler's methods, unless they
// say otherwise.
type Conn struct {
	// Every field belongs to the event loop but those under "hand-off" and
	// the trackers, which keep their own rules.
	gc  gnet.Conn
	l   *loop
	s   *Server
	ctx any

	timeouts *idle.Tracker // idle's policies: idle, keepalive, frame, handshake, max age
	framed   *framedState  // the Framed protocol's state; nil with Raw
	// outWatch watches queued output (see watchOutput); nil until output first
	// stays queued after a write, which an idle connection never has.
	outWatch *outWatch
	// client is the client's address when a PROXY header gave one (see
	// ClientAddr), &awaitingHeader while the header is awaited, and nil
	// otherwise: out of line, so that a connection without it pays a
	// pointer.
	client *netip.AddrPort

	// hand-off: written by timer callbacks on the wheel's goroutine, and
	// by SendAsync and CloseAsync on any goroutine, and taken by the event
	// loop, atomically; next is written by the pusher before it publishes c
	// on the loop's stack (post).
	pending       atomic.Uint32 // the expiry events (ev*) posted and not yet handled
	timeoutReason atomic.Uint32 // the Reason c.timeouts closed c with
	flags         atomic.Uint32 // flagQueued, flagOverAsync, flagCloseAsync, flagClosing
	// asyncBytes counts the bytes handed to SendAsync and not yet sent,
	// which Limits.OutputHard bounds. Any goroutine adds; the loop
	// subtracts.
	asyncBytes atomic.Int32
	next       *Conn

	// need is how many inbound bytes the frame under way needs before it
	// can be parsed (its header, then its whole length, at most MaxFrame
	// and so within int32): OnTraffic does not look at the buffered bytes
	// again until that many have arrived.
	need int32
	slot int32 // c's index in its loop's conns while open (addConn)

	inFrame   bool
	handshook bool
	sentClose bool
	closing   bool
	closed    bool
	rejected  bool
	reason    Reason
	// away is why the server is going away from c (ReasonShutdown,
	// ReasonMaxAge; ReasonNone: it is not): c closes with it once finished
	// (goAway).
	away Reason
}

// Send sends msg to the peer: with Framed, as a DATA frame that is kept
// (copied) until acknowledged and retransmitted if need be; with Raw, as
// bytes. Writes are batched until the current event returns. It returns
// ErrClosed on a closing connection; ErrUnackedLimit, sending nothing,
// when the peer has too much unacknowledged data (Limits.UnackedBytes, or
// retransmit.Config.Window messages; the error wraps
// retransmit.ErrWindowFull then); and ErrOutputLimit when the message would
// take the queued output over Limits.OutputHard, in which case the
// connection is closing with ReasonOutputLimit. O(len(msg)),
// allocation-free in steady state. Call it on the connection's event loop.
func (c *Conn) Send(msg []byte) error {
	if c.closing || c.closed {
		return ErrClosed
	}
	return c.s.proto.send(c, msg)
}

// noRoom closes c for output that would reach queued bytes, over the hard
// output limit, and returns ErrOutputLimit. The protocols' send methods
// check the limit themselves, and call it only when the check fails: a
// call for the check cost Send 1.5 ns of its 9 (BenchmarkConn_SendAsync,
// path=loop).
func (c *Conn) noRoom(queued int) error {
	c.overOutput(queued)
	return fmt.Errorf("%w: %d bytes queued, limit %d", ErrOutputLimit, queued, c.s.lim.outputHard)
}

// Close closes the connection with ReasonServerClosed (Framed: after a CLOSE
// frame). It is idempotent. Call it on the connection's event loop; from
// elsewhere, CloseAsync.
func (c *Conn) Close() error {
	c.closeWith(ReasonServerClosed)
	return nil
}

// CloseCode closes the connection with ReasonApplication and a code and
// text of the protocol's own: with Framed, the CLOSE frame carries them
// (codes from 1000 up are the application's, docs/protocol.md; code 0
// sends no CLOSE frame; text is cut to 256 bytes and must be UTF-8); with
// Raw nothing is sent. Either way the code and text are logged (info
// level), and that is the only place the server keeps them: OnClose, Stats
// and the metrics see ReasonApplication alone, so a handler that needs the
// code later keeps it itself (SetContext). Idempotent: the first close
// stays. Call it on the connection's event loop.
func (c *Conn) CloseCode(code uint16, text string) {
	if c.closing {
		return
	}
	if len(text) > frame.MaxReasonLen {
		text = strings.ToValidUTF8(text[:frame.MaxReasonLen], "")
	}
	c.s.log.Info("netserver: handler closed a connection", "remote", remote(c), "code", code, "text", text)
	c.closeFrame(ReasonApplication, frame.Code(code), text)
}

// Activity marks application activity now: the idle timeout
// (Timeouts.IdleTimeout) runs again from here. It is what every inbound
// byte does, unless Config.HandlerMarks. O(1); on the event loop.
func (c *Conn) Activity() { c.timeouts.ActivityAt(c.l.clock()) }

// RequestStart marks the start of a request: Timeouts.FrameTimeout, the
// per-request deadline, runs from now until RequestEnd; a call while a
// request is open does nothing. A request open also keeps a graceful
// Shutdown waiting. O(1); on the event loop.
func (c *Conn) RequestStart() {
	if !c.inFrame {
		c.inFrame = true
		c.timeouts.FrameStartAt(c.l.clock())
	}
}

// RequestEnd marks the end of the request open, clearing its deadline.
// O(1); on the event loop.
func (c *Conn) RequestEnd() {
	if c.inFrame {
		c.inFrame = false
		c.timeouts.FrameEnd()
	}
}

// HandshakeDone marks the protocol's handshake done, clearing
// Timeouts.HandshakeTimeout. Idempotent, O(1); on the event loop.
func (c *Conn) HandshakeDone() {
	if !c.handshook {
		c.handshook = true
		c.timeouts.HandshakeDone()
	}
}

// CloseWith closes the connection with reason r (Framed: after a CLOSE frame
// with r's code), which OnClose and the metrics then report. ReasonNone
// means ReasonServerClosed. It is idempotent: the first reason stays. Call
// it on the connection's event loop.
func (c *Conn) CloseWith(r Reason) {
	if r == ReasonNone || r >= numReasons {
		r = ReasonServerClosed
	}
	c.closeWith(r)
}

// RemoteAddr reports the address of the peer that connected (PeerAddr):
// behind a balancer that speaks the PROXY protocol, the balancer;
// ClientAddr says who the client is.
func (c *Conn) RemoteAddr() net.Addr { return c.gc.RemoteAddr() }

// Context returns the value set by SetContext.
func (c *Conn) Context() any { return c.ctx }

// SetContext attaches a value of the handler's to the connection.
func (c *Conn) SetContext(v any) { c.ctx = v }

// closeWith starts closing c for r: a CLOSE frame (Framed) is queued and the
// output flushed. Called on the loop outside OnTraffic, it closes at once;
// inside OnTraffic, OnTraffic returns gnet.Close.
func (c *Conn) closeWith(r Reason) {
	c.closeFrame(r, closeCode(r), r.String())
}

// closeFrame is closeWith with the CLOSE frame's code and text (Framed; a
// zero code sends none).
func (c *Conn) closeFrame(r Reason, code frame.Code, text string) {
	if c.closing {
		return
	}
	c.closing = true
	c.flags.Or(flagClosing)
	c.reason = r
	if !c.sentClose && code != 0 && !(r == ReasonShutdown && c.s.cfg.SilentShutdown) {
		c.s.proto.sayClose(c, code, text)
	}
	if c.l.inEvent != c {
		c.l.flushOwner()
		if !c.closed {
			_ = c.l.el.Close(c.gc)
		}
	}
}

// goAway starts a grace on c for r (ReasonShutdown, ReasonMaxAge): the
// peer is told (Framed: GOAWAY, unless r is ReasonShutdown and
// SilentShutdown), the server goes on serving it, and c closes with r once
// finished (OnTraffic, Shutdown), or when the grace ends (idle's max-age
// timer, Shutdown's deadline). A shutdown during a max-age grace tells the
// peer again, with a grace never longer than what is left; a max age
// reached during a shutdown changes nothing. On the loop.
func (c *Conn) goAway(r Reason, grace time.Duration) {
	if c.closing || c.away == ReasonShutdown || c.away == r {
		return
	}
	now := c.l.clock()
	grace = max(grace, 0)
	if c.away != ReasonNone && c.framed != nil {
		grace = min(grace, max(c.framed.awayEnd-now, 0))
	}
	c.away = r
	if c.framed != nil {
		c.framed.awayEnd = now + min(grace, frame.MaxGrace)
	}
	if r == ReasonShutdown && c.s.cfg.SilentShutdown {
		return
	}
	c.s.proto.goAway(c, r, grace)
}

// finishAway closes c with the reason it is going away for if it has
// finished (protocol.finished). On the loop.
func (c *Conn) finishAway() {
	if !c.closing && c.away != ReasonNone && c.s.proto.finished(c) {
		c.closeWith(c.away)
	}
}

// isIdle reports whether c can be closed by a graceful shutdown without
// losing anything: no frame half received, nothing unacknowledged or queued.
func (c *Conn) isIdle() bool {
	if _, msgs := c.s.proto.unacked(c); msgs != 0 {
		return false
	}
	return !c.inFrame && c.gc.OutboundBuffered() == 0
}
