package netserver

import (
	"time"

	"github.com/netwheel/netwheel/netserver/frame"
)

// protocol is what the Raw and Framed protocols do differently. A Server
// holds one (rawProtocol or framedProtocol, chosen by Config.Protocol in
// New) for all its connections; its methods keep a connection's state in the Conn, and
// run on the connection's event loop.
type protocol interface {
	// newConn allocates a connection with the protocol's state.
	newConn() *Conn
	// refusal returns what to send a peer refused with r before its
	// connection closes (nil: nothing).
	refusal(r Reason) []byte
	// warnsOfAge reports whether the protocol tells the peer when the
	// connection reaches its maximum age (goAway), so that the idle
	// tracker's GoAway hook is worth its allocation.
	warnsOfAge() bool
	// open sets up c's protocol state, once c's idle tracker is set up. An
	// error is a bug: the configuration was validated by New.
	open(c *Conn) error
	// read acts on c's buffered inbound bytes, in OnTraffic.
	read(c *Conn)
	// send queues msg for c, which is open, within c's limits (see
	// Conn.Send).
	send(c *Conn, msg []byte) error
	// sayClose queues the protocol's close message, with code and text, for
	// a peer that has not been told yet (c.sentClose).
	sayClose(c *Conn, code frame.Code, text string)
	// goAway tells the peer that the server is going away from c for r
	// (ReasonShutdown, ReasonMaxAge) and sends its final close within
	// grace (Conn.goAway); Raw has no way to.
	goAway(c *Conn, r Reason, grace time.Duration)
	// finished reports whether c, going away, may close now without
	// cutting anything the peer may still finish.
	finished(c *Conn) bool
	// probe sends c's peer a keepalive probe.
	probe(c *Conn)
	// retransmit resends the earliest message the peer has not
	// acknowledged, if any.
	retransmit(c *Conn)
	// unacked reports what c has sent and the peer not acknowledged.
	unacked(c *Conn) (bytes, msgs int)
	// release lets c's protocol state go as c closes.
	release(c *Conn)
}
