package netserver

import (
	"errors"
)

// ConnHandler is what every handler of a Server implements: a Handler,
// which takes whole messages, or a StreamHandler, which parses its own out
// of a Raw byte stream. New takes either and refuses anything else. Its
// methods, and those of Handler and StreamHandler, run on the connection's
// event loop, one at a time per connection, and must not block. A panic in
// any of them closes that connection with ReasonPanic; the server keeps
// serving the others.
type ConnHandler interface {
	// OnOpen is called when a connection is accepted.
	OnOpen(c *Conn)
	// OnClose is called once when the connection closes, with the reason.
	// The Conn must not be used afterwards.
	OnClose(c *Conn, r Reason)
}

// Handler is the protocol a user writes against a Server that delivers
// messages: every Framed server's, and a Raw server's that takes the bytes
// as they arrive.
type Handler interface {
	ConnHandler
	// OnMessage delivers inbound data: with Framed, the payload of one DATA
	// frame (each exactly once, in order); with Raw, the bytes that
	// arrived. msg is valid only during the call.
	OnMessage(c *Conn, msg []byte)
}

// StreamHandler is the handler of a Raw server that parses its own
// messages: OnStream is called with the byte stream (a handler that also
// has OnMessage gets OnStream alone). in holds every inbound byte not
// consumed yet, what earlier calls left followed by what arrived since, and
// OnStream returns how many of them, from the front, it consumed (clamped
// to [0, len(in)]); the rest stays buffered and comes again, with more, on
// the next call. At most Config.MaxFrame bytes (default 64 KiB) may be
// left: more closes the connection with ReasonTooLarge. in is valid only
// during the call; the cost of a call is one copy of what was left when
// more arrives, so parse whole messages rather than leave a large one to
// grow a byte at a time. The Framed protocol delivers messages: New refuses
// a StreamHandler without OnMessage for it.
type StreamHandler interface {
	ConnHandler
	OnStream(c *Conn, in []byte) (consumed int)
}

// Prober must be implemented by a Raw server's handler when Timeouts.KeepaliveTime
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
