package netserver

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/frame"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// Handler is the protocol a user writes against a Server. Its methods run on
// the connection's event loop, one at a time per connection, and must not
// block. A panic in any of them closes that connection with ReasonPanic; the
// server keeps serving the others.
type Handler interface {
	// OnOpen is called when a connection is accepted.
	OnOpen(c *Conn)
	// OnMessage delivers inbound data: with Framed, the payload of one DATA
	// frame (each exactly once, in order); with Raw, the bytes that
	// arrived. msg is valid only during the call.
	OnMessage(c *Conn, msg []byte)
	// OnClose is called once when the connection closes, with the reason.
	// The Conn must not be used afterwards.
	OnClose(c *Conn, r Reason)
}

// Echo is a Handler that sends every message back.
type Echo struct{}

// OnOpen does nothing.
func (Echo) OnOpen(*Conn) {}

// OnMessage sends msg back. If the peer has too many unacknowledged messages
// (the retransmission window is full) the connection closes with
// ReasonOverload rather than drop the echo.
func (Echo) OnMessage(c *Conn, msg []byte) {
	if err := c.Send(msg); err != nil && !errors.Is(err, ErrClosed) {
		c.closeWith(ReasonOverload)
	}
}

// OnClose does nothing.
func (Echo) OnClose(*Conn, Reason) {}

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

// Expiry events, handed from the wheel's goroutine to the event loop.
const (
	evClose uint32 = 1 << iota
	evProbe
	evRetransmit
	evDrain
	evStall
)

// Conn is one connection of a Server. Its methods must be called on the
// connection's event loop, that is from the Handler's methods, unless they
// say otherwise.
//
// Ownership: the fields under "hand-off" are written by timer callbacks on
// the wheel's goroutine and taken by the event loop, atomically (next is
// written by the pusher before it publishes c on the loop's stack). Every
// other field belongs to the event loop. The trackers keep their own rules.
type Conn struct {
	gc  gnet.Conn
	l   *loop
	s   *Server
	ctx any

	idle  *idle.Tracker
	rtx   retransmit.Tracker // Framed only
	stall wheel.Timer        // initialized only with a write-stall timeout

	// hand-off
	events     atomic.Uint32
	hookReason atomic.Uint32
	queued     atomic.Bool
	next       *Conn

	recvNext  uint64   // next DATA sequence number expected from the peer
	sendNext  uint64   // sequence number of the next DATA we send
	ackedTo   uint64   // highest sequence number the peer acknowledged
	unacked   [][]byte // payloads of DATA sent and not acknowledged, oldest first
	nonce     uint64
	inFrame   bool
	handshook bool
	sentClose bool
	closing   bool
	closed    bool
	rejected  bool
	reason    Reason
}

// Send sends msg to the peer: with Framed, as a DATA frame that is kept
// (copied) until acknowledged and retransmitted if need be; with Raw, as
// bytes. Writes are batched until the current event returns. It returns
// ErrClosed on a closing connection and an error wrapping
// retransmit.ErrWindowFull when the peer has too many unacknowledged
// messages. Allocation-free in steady state.
func (c *Conn) Send(msg []byte) error {
	if c.closing || c.closed {
		return ErrClosed
	}
	l := c.own()
	if c.s.cfg.Protocol == Raw {
		l.out = append(l.out, msg...)
		return nil
	}
	seq := c.sendNext
	if err := c.rtx.Sent(seq, l.clock()); err != nil {
		return fmt.Errorf("netserver: send: %w", err)
	}
	c.sendNext++
	c.unacked = append(c.unacked, append(l.buffer(len(msg)), msg...))
	l.out = frame.AppendData(l.out, seq, msg)
	return nil
}

// Close closes the connection with ReasonServerClosed (Framed: after a CLOSE
// frame). It is idempotent.
func (c *Conn) Close() error {
	c.closeWith(ReasonServerClosed)
	return nil
}

// RemoteAddr reports the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.gc.RemoteAddr() }

// Context returns the value set by SetContext.
func (c *Conn) Context() any { return c.ctx }

// SetContext attaches a value of the handler's to the connection.
func (c *Conn) SetContext(v any) { c.ctx = v }

// post hands events to the event loop. Any goroutine; allocation-free.
func (c *Conn) post(ev uint32) {
	c.events.Or(ev)
	if c.queued.CompareAndSwap(false, true) {
		l := c.l
		for {
			h := l.head.Load()
			c.next = h
			if l.head.CompareAndSwap(h, c) {
				return
			}
		}
	}
}

func (c *Conn) postClose(r Reason) {
	c.hookReason.CompareAndSwap(0, uint32(r))
	c.post(evClose)
}

// closeWith starts closing c for r: a CLOSE frame (Framed) is queued and the
// output flushed. Called on the loop outside OnTraffic, it closes at once;
// inside OnTraffic, OnTraffic returns gnet.Close.
func (c *Conn) closeWith(r Reason) {
	if c.closing {
		return
	}
	c.closing = true
	c.reason = r
	if c.s.cfg.Protocol == Framed && !c.sentClose && r.code() != 0 &&
		!(r == ReasonShutdown && c.s.cfg.SilentShutdown) {
		c.sentClose = true
		l := c.own()
		l.out = frame.AppendClose(l.out, r.code(), r.String())
	}
	if c.l.inEvent != c {
		c.l.flushOwner()
		if !c.closed {
			_ = c.l.el.Close(c.gc)
		}
	}
}

// own makes c the owner of its loop's output buffer, writing out first what
// the buffer holds for another connection (a handler may Send to several
// connections of its loop in one event), and returns the loop.
func (c *Conn) own() *loop {
	l := c.l
	if l.owner != c {
		if prev := l.owner; prev != nil {
			prev.flush()
		}
		l.owner = c
	}
	return l
}

// flushOwner writes out whatever the loop's output buffer holds, to the
// connection it is for. Every event ends with it.
func (l *loop) flushOwner() {
	if o := l.owner; o != nil {
		o.flush()
	}
}

// flush writes what the loop's buffer holds for c, if anything. gnet's
// Write closes the connection (calling OnClose) if the socket fails.
func (c *Conn) flush() {
	l := c.l
	if l.owner != c {
		return
	}
	l.owner = nil
	if len(l.out) == 0 || c.closed {
		l.out = l.out[:0]
		return
	}
	_, _ = c.gc.Write(l.out)
	l.out = l.out[:0]
	if c.closed {
		return
	}
	if c.s.stallTimeout > 0 {
		if c.gc.OutboundBuffered() > 0 {
			if !c.stall.Pending() {
				c.stall.ResetFrom(l.clock(), c.s.stallTimeout)
			}
		} else {
			c.stall.Stop()
		}
	}
}

// isIdle reports whether c can be closed by a graceful shutdown without
// losing anything: no frame half received, nothing unacknowledged or queued.
func (c *Conn) isIdle() bool {
	return !c.inFrame && len(c.unacked) == 0 && c.gc.OutboundBuffered() == 0
}

// handleEvents runs the expiries handed over by the wheel, on the loop.
func (c *Conn) handleEvents(ev uint32) {
	s := c.s
	if ev&evClose != 0 {
		if due, ok := c.idle.Due(); ok {
			s.m.late.Observe((s.wheel.Elapsed() - due).Seconds())
		}
		c.closeWith(Reason(c.hookReason.Load()))
		return
	}
	if ev&evStall != 0 && c.gc.OutboundBuffered() > 0 {
		c.closeWith(ReasonWriteStall)
		return
	}
	if ev&evDrain != 0 && s.cfg.Protocol == Framed && !c.sentClose {
		// Max age reached: tell the peer now; the close follows after the grace.
		c.sentClose = true
		l := c.own()
		l.out = frame.AppendClose(l.out, frame.CodeMaxAge, "max_age: closing after grace period")
	}
	if ev&evProbe != 0 && s.cfg.Protocol == Framed {
		c.nonce++
		l := c.own()
		l.out = frame.AppendPing(l.out, c.nonce)
		s.probes.Add(1)
	}
	if ev&evRetransmit != 0 && len(c.unacked) > 0 {
		// RFC 6298 5.4: resend the earliest unacknowledged message.
		l := c.own()
		l.out = frame.AppendData(l.out, c.ackedTo+1, c.unacked[0])
		s.retransmits.Add(1)
		s.m.rto.Observe(c.rtx.Stats().RTO.Seconds())
	}
	c.l.flushOwner()
}
