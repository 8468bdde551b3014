package netserver

// Peeks reports how many times the server's event loops have looked at a
// framed connection's inbound bytes.
func (s *Server) Peeks() int64 {
	var n int64
	for _, l := range *s.loops.Load() {
		n += l.peeks.Load()
	}
	return n
}

// Loop identifies the event loop c runs on: connections on the same loop
// return the same value.
func (c *Conn) Loop() any { return c.l }

// AsyncQueued reports how many SendAsync and CloseAsync calls wait in c's
// loop's inbox.
func (c *Conn) AsyncQueued() int {
	c.l.inboxMu.Lock()
	defer c.l.inboxMu.Unlock()
	return len(c.l.inbox)
}

// CountLoopback makes s count loopback clients against their source's
// limit, as it does every other source, so that a test on 127.0.0.1 can
// reach the limit without a PROXY header. Call it before Start.
func (s *Server) CountLoopback() { s.countLoopback = true }

// MaxConnsPerSource resolves Config.MaxConnsPerSource for a bound of
// maxConns open connections (0: none); 0 means no per-source bound.
func MaxConnsPerSource(cfg, maxConns int) int { return maxConnsPerSource(cfg, maxConns) }
