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
)

// gnetHandler is the server's gnet.EventHandler: it turns gnet's calls
// into the server's (OnBoot, OnOpen, OnTraffic, OnClose, OnShutdown).
type gnetHandler struct {
	gnet.BuiltinEventEngine
	s *Server
}

// OnBoot records the engine and the address it listens on, and lets Start
// return.
func (e *gnetHandler) OnBoot(eng gnet.Engine) gnet.Action {
	s := e.s
	s.eng = eng
	s.addr = boundAddr(eng, s.cfg.Addr)
	close(s.booted)
	return gnet.None
}

// OnOpen admits a new connection, sets up its timers and calls the
// handler's OnOpen.
func (e *gnetHandler) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	s.accepted.Add(1)
	l := s.loopFor(gc.EventLoop())
	now := l.readClock()
	c := s.proto.newConn()
	c.gc, c.l, c.s = gc, l, s
	gc.SetContext(c)
	if r := s.admit(); r != ReasonNone {
		c.refuse(r)
		return s.proto.refusal(r), gnet.Close
	}
	if r := c.proxyAdmit(); r != ReasonNone {
		s.open.Add(-1)
		s.checkDrained()
		c.refuse(r)
		return s.proto.refusal(r), gnet.Close
	}
	if err := c.startTimers(now); err != nil { // validated in New; cannot happen
		s.log.Error("netserver: connection timers", "err", err)
		s.open.Add(-1)
		c.refuse(ReasonPanic)
		return nil, gnet.Close
	}
	if k := s.cfg.Kernel; k.UserTimeout > 0 {
		if err := setUserTimeout(gc.Fd(), k.UserTimeout); err != nil {
			s.log.Debug("netserver: TCP_USER_TIMEOUT", "err", err)
		}
	}
	l.addConn(c)
	if c.client == &awaitingHeader {
		c.flags.Or(flagNoHandler) // OnOpen runs once the header has come (readHeader)
		return nil, gnet.None
	}
	return nil, l.opened(c)
}

// admit counts a new connection open and returns ReasonNone, or, if it
// must be refused, uncounts it and returns why. It reserves the place
// first, so that event loops opening connections at the same time cannot
// overshoot MaxConns together.
func (s *Server) admit() Reason {
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
	}
	return reject
}

// refuse marks c, which never opened, as closing with r: OnClose counts it
// and calls no handler.
func (c *Conn) refuse(r Reason) {
	c.rejected, c.closing, c.reason = true, true, r
}

// startTimers sets up c's idle tracker, with only the hooks the
// configuration calls (each is an allocation), and the protocol's state.
func (c *Conn) startTimers(now time.Duration) error {
	s := c.s
	hooks := idle.Hooks{Close: func(r idle.Reason) { c.postClose(Reason(r)) }}
	if s.idleCfg.KeepaliveTime > 0 {
		hooks.Probe = func() { c.post(evProbe) }
	}
	if s.idleCfg.MaxAgeGrace > 0 && s.proto.warnsOfAge() {
		hooks.GoAway = func() { c.post(evGoAway) }
	}
	tr := new(idle.Tracker)
	if err := tr.Init(s.wheel, now, s.idleCfg, hooks); err != nil {
		return fmt.Errorf("idle tracker: %w", err)
	}
	c.timeouts = tr
	if err := s.proto.open(c); err != nil {
		tr.Stop()
		return fmt.Errorf("protocol: %w", err)
	}
	return nil
}

// opened calls the handler's OnOpen for c and writes out what it sent. It
// returns gnet.Close if the handler closed c.
func (l *loop) opened(c *Conn) gnet.Action {
	s := l.s
	l.inEvent = c // closeWith must not close inside OnOpen: return gnet.Close
	s.safely(c, func() { s.handler.OnOpen(c) })
	l.inEvent = nil
	l.flushOwner()
	if c.closing && !c.closed {
		return gnet.Close
	}
	return gnet.None
}

// OnTraffic hands the connection's inbound bytes to the protocol and
// writes out what that sent; while the server is going away from the
// connection (a shutdown, its max age), it then closes it if it has
// finished (Conn.goAway).
func (e *gnetHandler) OnTraffic(gc gnet.Conn) gnet.Action {
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
	l.readClock()
	l.inEvent = c
	s.safely(c, func() {
		if c.client != &awaitingHeader || c.readHeader() {
			s.proto.read(c)
		}
	})
	l.inEvent = nil
	l.flushOwner()
	if !c.closing && c.away != ReasonNone {
		l.inEvent = c
		c.finishAway()
		l.inEvent = nil
		l.flushOwner()
	}
	if c.closing {
		return gnet.Close
	}
	return gnet.None
}

// OnClose releases a closed connection's timers and state, logs and
// counts its close, and calls the handler's OnClose.
func (e *gnetHandler) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok || c.closed {
		return gnet.None
	}
	s := e.s
	c.closed = true
	c.flags.Or(flagClosing)
	if c.reason == ReasonNone {
		c.reason = s.closeReason(err)
	}
	s.closed[c.reason].Add(1)
	if c.rejected {
		c.uncountSource() // counted only if refused after proxyAdmit (startTimers)
		s.log.Debug("netserver: connection refused", "remote", remote(c), "reason", c.reason.String())
		return gnet.None
	}
	unackedBytes, unackedMsgs := s.proto.unacked(c)
	c.release()
	c.uncountSource()
	s.open.Add(-1)
	if c.flags.Load()&flagCut != 0 {
		s.cuts.Add(1)
	}
	s.logClose(c, err, unackedBytes, unackedMsgs)
	if c.flags.Load()&flagNoHandler != 0 {
		s.checkDrained()
		return gnet.None
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("netserver: handler panicked in OnClose", "panic", fmt.Sprint(p))
			}
		}()
		s.handler.OnClose(c, c.reason)
	}()
	s.checkDrained()
	return gnet.None
}

// closeReason is the reason of a close that nothing of the server's
// started, from gnet's err.
func (s *Server) closeReason(err error) Reason {
	switch {
	case err == nil && s.draining.Load():
		return ReasonShutdown
	case err == nil:
		return ReasonServerClosed
	case errors.Is(err, io.EOF):
		return ReasonPeerClosed
	}
	return ReasonError
}

// release stops c's timers, lets its protocol state go and takes it off its
// loop.
func (c *Conn) release() {
	c.timeouts.Stop()
	if c.outWatch != nil {
		c.outWatch.timer.Stop()
	}
	c.s.proto.release(c)
	c.l.removeConn(c)
	if c.l.owner == c { // output queued for a connection that is gone
		c.l.owner = nil
		c.l.out = c.l.out[:0]
	}
}

// logClose logs c's close, at closeLevel's level, with what the peer left
// unacknowledged if that is why; a connection Shutdown cut at its deadline
// is logged at info level, with what it left unfinished.
func (s *Server) logClose(c *Conn, err error, unackedBytes, unackedMsgs int) {
	cut := c.flags.Load()&flagCut != 0
	level := closeLevel(c.reason, err)
	if cut {
		level = max(level, slog.LevelInfo)
	}
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"remote", remote(c), "reason", c.reason.String()}
	if c.proxied() {
		attrs = append(attrs, "peer", c.gc.RemoteAddr().String())
	}
	switch {
	case cut:
		attrs = append(attrs, "cut", true, "unacked_bytes", unackedBytes, "unacked_messages", unackedMsgs)
	case err != nil && c.reason == ReasonError:
		attrs = append(attrs, "err", err.Error())
	case c.reason == ReasonUnackedLimit:
		attrs = append(attrs, "unacked_bytes", unackedBytes, "unacked_messages", unackedMsgs,
			"limit_bytes", s.lim.unackedBytes)
	}
	s.log.Log(context.Background(), level, "netserver: connection closed", attrs...)
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
// errors. Such a close is still counted under ReasonError. The refusals at
// the edge (ReasonSourceLimit, the PROXY header's) are at debug: a flood
// of them must not flood the log; the metrics count them, and readHeader
// warns of a bad header with its details.
func closeLevel(r Reason, err error) slog.Level {
	if r == ReasonError && (errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ETIMEDOUT)) {
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

// remote is the client's address for logs (Conn.ClientAddr).
func remote(c *Conn) string {
	if c == nil || c.gc == nil || c.gc.RemoteAddr() == nil {
		return ""
	}
	if c.proxied() {
		return c.client.String()
	}
	return c.gc.RemoteAddr().String()
}
