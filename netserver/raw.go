package netserver

import (
	"time"

	"github.com/netwheel/netwheel/netserver/frame"
)

// rawProtocol is the Raw protocol: a byte stream the handler parses, with no
// protocol state and nothing of its own to send.
type rawProtocol struct{}

func (rawProtocol) newConn() *Conn                      { return &Conn{} }
func (rawProtocol) refusal(Reason) []byte               { return nil }
func (rawProtocol) warnsOfAge() bool                    { return false }
func (rawProtocol) open(*Conn) error                    { return nil }
func (rawProtocol) read(c *Conn)                        { c.onRaw() }
func (rawProtocol) sayClose(*Conn, frame.Code, string)  {}
func (rawProtocol) goAway(*Conn, Reason, time.Duration) {}
func (rawProtocol) retransmit(*Conn)                    {}
func (rawProtocol) unacked(*Conn) (int, int)            { return 0, 0 }
func (rawProtocol) release(*Conn)                       {}

// finished reports whether c, going away, may close: nothing is
// unfinished (isIdle). Raw has no notice to send, so that is all a
// shutdown can know.
func (rawProtocol) finished(c *Conn) bool { return c.isIdle() }

// send queues msg as it is.
func (rawProtocol) send(c *Conn, msg []byte) error {
	l := c.claimOutput()
	if queued := c.gc.OutboundBuffered() + len(l.out) + len(msg); queued > c.s.lim.outputHard {
		return c.noRoom(queued)
	}
	l.out = append(l.out, msg...)
	return nil
}

// probe has the handler send its protocol's probe (New has checked that it
// implements Prober when keepalive probes are on). A connection awaiting
// its PROXY header is not the handler's yet (flagNoHandler): it sends
// nothing, and its silence runs out the keepalive as any peer's does.
func (rawProtocol) probe(c *Conn) {
	if c.flags.Load()&flagNoHandler != 0 {
		return
	}
	if p, ok := c.s.handler.(Prober); ok {
		p.OnProbe(c)
	}
}

// onRaw hands c's inbound bytes to the handler.
func (c *Conn) onRaw() {
	s := c.s
	buf, _ := c.gc.Peek(-1)
	if len(buf) == 0 {
		return
	}
	if now := c.l.clock(); s.cfg.HandlerMarks {
		c.timeouts.BytesInAt(now)
	} else {
		c.timeouts.ReceivedAt(now)
		c.HandshakeDone()
	}
	if s.stream == nil {
		s.messages.OnMessage(c, buf)
		_, _ = c.gc.Discard(len(buf))
		return
	}
	n := min(max(s.stream.OnStream(c, buf), 0), len(buf))
	switch {
	case c.closing:
		_, _ = c.gc.Discard(-1)
	case len(buf)-n > s.maxFrame:
		_, _ = c.gc.Discard(-1)
		c.s.log.Warn("netserver: a handler left more input than MaxFrame", "remote", remote(c),
			"left_bytes", len(buf)-n, "max_frame", s.maxFrame)
		c.closeWith(ReasonTooLarge)
	case n > 0:
		// Never Discard(0): gnet's Discard(n <= 0) empties the whole buffer.
		_, _ = c.gc.Discard(n)
	}
}
