package netserver

func (c *Conn) onRaw() {
	s := c.s
	buf, _ := c.gc.Peek(-1)
	if len(buf) == 0 {
		return
	}
	if now := c.l.clock(); s.cfg.HandlerMarks {
		c.idle.BytesInAt(now)
	} else {
		c.idle.ReceivedAt(now)
		c.HandshakeDone()
	}
	sh, ok := s.h.(StreamHandler)
	if !ok {
		s.h.OnMessage(c, buf)
		_, _ = c.gc.Discard(len(buf))
		return
	}
	n := min(max(sh.OnStream(c, buf), 0), len(buf))
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
