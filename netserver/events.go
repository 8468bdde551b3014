package netserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// events implements gnet.EventHandler.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

func (e *events) OnBoot(eng gnet.Engine) gnet.Action {
	s := e.s
	s.eng = eng
	s.addr = listenAddr(eng, s.cfg.Addr)
	close(s.booted)
	return gnet.None
}

func (e *events) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	s.accepted.Add(1)
	l := s.loopFor(gc.EventLoop())
	now := l.event()
	var c *Conn
	if s.cfg.Protocol == Framed {
		fc := &framedConn{framed: framed{recvNext: 1, sendNext: 1}}
		c = &fc.Conn
		c.f = &fc.framed
	} else {
		c = &Conn{}
	}
	c.gc, c.l, c.s = gc, l, s
	gc.SetContext(c)
	// Reserve a place first, so event loops opening connections at the same
	// time cannot overshoot MaxConns together.
	n := s.open.Add(1)
	var reject Reason
	switch {
	case s.draining.Load():
		reject = ReasonShutdown
	case s.maxConns > 0 && n > s.maxConns:
		reject = ReasonOverload
	}
	if reject != ReasonNone {
		s.open.Add(-1)
		s.checkDrained()
		c.rejected = true
		c.closing = true
		c.reason = reject
		if s.cfg.Protocol == Framed {
			return frame.AppendClose(nil, closeCode(reject), reject.String()), gnet.Close
		}
		return nil, gnet.Close
	}

	// Only the hooks the configuration calls: each is an allocation.
	hooks := idle.Hooks{Close: func(r idle.Reason) { c.postClose(r) }}
	if s.idleCfg.KeepaliveTime > 0 {
		hooks.Probe = func() { c.post(evProbe) }
	}
	if s.idleCfg.MaxAgeGrace > 0 && s.cfg.Protocol == Framed {
		// Only Framed tells the peer, and only a grace leaves time to.
		hooks.Drain = func() { c.post(evDrain) }
	}
	tr, err := idle.NewAt(s.wheel, now, s.idleCfg, hooks)
	if err != nil { // validated in New; cannot happen
		s.log.Error("netserver: idle tracker", "err", err)
		s.open.Add(-1)
		c.rejected, c.closing, c.reason = true, true, ReasonPanic
		return nil, gnet.Close
	}
	c.idle = tr
	if s.cfg.Protocol == Framed {
		err := c.f.rtx.Init(s.wheel, s.cfg.Retransmit, retransmit.Handlers{
			Retransmit: func(uint64, int) { c.post(evRetransmit) },
			GiveUp:     func(error) { c.postClose(ReasonGiveUp) },
			Sample:     func(rtt time.Duration) { s.m.rtt.Observe(rtt.Seconds()) },
		})
		if err != nil {
			s.log.Error("netserver: retransmit tracker", "err", err)
			tr.Stop()
			s.open.Add(-1)
			c.rejected, c.closing, c.reason = true, true, ReasonPanic
			return nil, gnet.Close
		}
	}
	if s.cfg.Kernel.UserTimeout > 0 {
		if err := setUserTimeout(gc.Fd(), s.cfg.Kernel.UserTimeout); err != nil {
			s.log.Debug("netserver: TCP_USER_TIMEOUT", "err", err)
		}
	}
	l.addConn(c)
	l.inEvent = c // closeWith must not close inside OnOpen: return gnet.Close
	s.safely(c, func() { s.h.OnOpen(c) })
	l.inEvent = nil
	l.flushOwner()
	if c.closing && !c.closed {
		return nil, gnet.Close
	}
	return nil, gnet.None
}

func (e *events) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.Close
	}
	if c.closing {
		_, _ = gc.Discard(-1)
		return gnet.Close
	}
	s := e.s
	l := c.l
	l.event()
	l.inEvent = c
	s.safely(c, func() {
		if s.cfg.Protocol == Raw {
			c.onRaw()
		} else {
			c.onFramed()
		}
	})
	l.inEvent = nil
	l.flushOwner()
	if !c.closing && s.draining.Load() && c.isIdle() {
		l.inEvent = c
		c.closeWith(ReasonShutdown)
		l.inEvent = nil
		l.flushOwner()
	}
	if c.closing {
		return gnet.Close
	}
	return gnet.None
}

func (e *events) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok || c.closed {
		return gnet.None
	}
	s := e.s
	c.closed = true
	if c.reason == ReasonNone {
		switch {
		case err == nil && s.draining.Load():
			c.reason = ReasonShutdown
		case err == nil:
			c.reason = ReasonServerClosed
		case errors.Is(err, io.EOF):
			c.reason = ReasonPeerClosed
		default:
			c.reason = ReasonError
		}
	}
	s.closed[c.reason].Add(1)
	if c.rejected {
		s.log.Debug("netserver: connection refused", "remote", remote(c), "reason", c.reason.String())
		return gnet.None
	}
	c.idle.Stop()
	if s.cfg.Protocol == Framed {
		c.f.rtx.Close()
	}
	if c.out != nil {
		c.out.timer.Stop()
	}
	var unackedBytes, unackedMsgs int
	if c.f != nil {
		unackedBytes, unackedMsgs = c.f.unacked.bytes(), c.f.unacked.len()
		c.f.unacked.reset(true)
	}
	c.l.removeConn(c)
	if c.l.owner == c { // output queued for a connection that is gone
		c.l.owner = nil
		c.l.out = c.l.out[:0]
	}
	s.open.Add(-1)
	level := closeLevel(c.reason, err)
	if s.log.Enabled(context.Background(), level) {
		attrs := []any{"remote", remote(c), "reason", c.reason.String()}
		switch {
		case err != nil && c.reason == ReasonError:
			attrs = append(attrs, "err", err.Error())
		case c.reason == ReasonUnackedLimit:
			attrs = append(attrs, "unacked_bytes", unackedBytes, "unacked_messages", unackedMsgs,
				"limit_bytes", s.lim.unackedBytes)
		}
		s.log.Log(context.Background(), level, "netserver: connection closed", attrs...)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("netserver: handler panicked in OnClose", "panic", fmt.Sprint(p))
			}
		}()
		s.h.OnClose(c, c.reason)
	}()
	s.checkDrained()
	return gnet.None
}

// peerGone reports whether err, a read or write error, says only that the
// peer went away: it reset the connection, closed it under a write, or
// stopped answering TCP's retransmissions or keepalives.
func peerGone(err error) bool {
	return errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ETIMEDOUT)
}

// closeLevel is the level a close for r is logged at: debug for the ends
// of a connection's normal life (the peer closed, it was idle, it reached
// its maximum age, the server closed it or shut down), which the metrics
// count and which would otherwise cost a line per connection when many
// idle connections are reaped at once; info for a timeout that finds a
// peer gone or too slow; warn for a peer that broke the protocol or a
// limit, and for errors, but for the errors that only say the peer went
// away (ECONNRESET, EPIPE, ETIMEDOUT), which are routine on real networks
// and at info, so that a peer resetting its connections cannot bury real
// errors. Such a close is still counted under ReasonError.
func closeLevel(r Reason, err error) slog.Level {
	if r == ReasonError && peerGone(err) {
		return slog.LevelInfo
	}
	switch r {
	case ReasonDeadPeer, ReasonKeepalive, ReasonFrameDeadline, ReasonHandshake, ReasonWriteStall, ReasonGiveUp:
		return slog.LevelInfo
	case ReasonProtocol, ReasonTooLarge, ReasonOverload, ReasonPanic, ReasonError, ReasonOutputLimit, ReasonUnackedLimit,
		ReasonPingFlood:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// safely runs f, turning a panic into a close with ReasonPanic.
func (s *Server) safely(c *Conn, f func()) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("netserver: handler panicked; closing the connection",
				"remote", remote(c), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if c.closed {
				return // it closed (and was counted) before the panic
			}
			c.closing = false // let closeWith run
			c.closeWith(ReasonPanic)
		}
	}()
	f()
}

func remote(c *Conn) string {
	if c == nil || c.gc == nil || c.gc.RemoteAddr() == nil {
		return ""
	}
	return c.gc.RemoteAddr().String()
}
