package netserver

import (
	"errors"
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

// StreamHandler may be implemented by a Raw protocol's Handler that parses
// its own messages: OnStream is then called instead of OnMessage. in holds
// every inbound byte not consumed yet, what earlier calls left followed by
// what arrived since, and OnStream returns how many of them, from the
// front, it consumed (clamped to [0, len(in)]); the rest stays buffered and
// comes again, with more, on the next call. At most Config.MaxFrame bytes
// (default 64 KiB) may be left: more closes the connection with
// ReasonTooLarge. in is valid only during the call; the cost of a call is
// one copy of what was left when more arrives, so parse whole messages
// rather than leave a large one to grow a byte at a time. Called on the
// connection's event loop.
type StreamHandler interface {
	OnStream(c *Conn, in []byte) (consumed int)
}

// Prober must be implemented by a Raw Handler when Timeouts.KeepaliveTime
// is set: OnProbe is called, on the connection's event loop, each time a
// keepalive probe is due, and sends the protocol's own (a "PING" line, an
// empty message), typically with Send. Any inbound byte answers it.
type Prober interface {
	OnProbe(c *Conn)
}

// Echo is a Handler that sends every message back.
type Echo struct{}

// OnOpen does nothing.
func (Echo) OnOpen(*Conn) {}

// OnMessage sends msg back. If the peer has too much unacknowledged data
// (Limits.UnackedBytes, or the retransmission window) the connection closes
// with ReasonUnackedLimit rather than drop the echo; if its queued output
// would pass Limits.OutputHard, Send has closed it with ReasonOutputLimit.
func (Echo) OnMessage(c *Conn, msg []byte) {
	if err := c.Send(msg); errors.Is(err, ErrUnackedLimit) {
		c.CloseWith(ReasonUnackedLimit)
	}
}

// OnClose does nothing.
func (Echo) OnClose(*Conn, Reason) {}
