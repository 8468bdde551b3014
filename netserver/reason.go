package netserver

import (
	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/frame"
)

// Reason says why a connection closed. Its String names are stable,
// lower_snake_case metric labels.
type Reason uint8

// The reasons a connection closes.
const (
	ReasonNone          Reason = iota
	ReasonPeerClosed           // the peer closed (EOF, or a framed CLOSE)
	ReasonError                // a read or write failed (reset by peer, broken pipe)
	ReasonServerClosed         // the handler closed it (Conn.Close)
	ReasonShutdown             // the server shut down
	ReasonIdle                 // no application activity for the idle timeout
	ReasonDeadPeer             // no inbound byte for the read-silence timeout
	ReasonKeepalive            // keepalive probes went unanswered
	ReasonFrameDeadline        // a frame took too long to arrive (slowloris)
	ReasonHandshake            // no complete first frame in time
	ReasonMaxAge               // the connection reached its maximum age
	ReasonWriteStall           // the peer did not read what the server sent
	ReasonGiveUp               // retransmission gave up
	ReasonProtocol             // malformed frame, unknown type, bad sequence number
	ReasonTooLarge             // a frame longer than MaxFrame
	ReasonOverload             // too many connections (MaxConns)
	ReasonPanic                // the handler panicked
	ReasonOutputLimit          // queued output over Limits.OutputHard, or over OutputSoft too long
	ReasonUnackedLimit         // unacknowledged data over Limits.UnackedBytes or the retransmit window
	ReasonPingFlood            // PINGs faster than Limits.PingsPerSecond
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonNone: "none", ReasonPeerClosed: "peer_closed", ReasonError: "error",
	ReasonServerClosed: "server_closed", ReasonShutdown: "shutdown", ReasonIdle: "idle",
	ReasonDeadPeer: "dead_peer", ReasonKeepalive: "keepalive", ReasonFrameDeadline: "frame_deadline",
	ReasonHandshake: "handshake", ReasonMaxAge: "max_age", ReasonWriteStall: "write_stall",
	ReasonGiveUp: "retransmit_give_up", ReasonProtocol: "protocol_error", ReasonTooLarge: "frame_too_large",
	ReasonOverload: "overload", ReasonPanic: "handler_panic", ReasonOutputLimit: "output_limit",
	ReasonUnackedLimit: "unacked_limit", ReasonPingFlood: "ping_flood",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons lists every reason a connection can close with (without
// ReasonNone), for pre-registering metric labels.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := ReasonPeerClosed; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// code is the CLOSE frame code the server sends for r, or 0 for none (the
// peer closed, or the socket failed: nobody to tell).
func (r Reason) code() frame.Code {
	switch r {
	case ReasonServerClosed:
		return frame.CodeNormal
	case ReasonShutdown:
		return frame.CodeShutdown
	case ReasonIdle:
		return frame.CodeIdle
	case ReasonDeadPeer, ReasonKeepalive:
		return frame.CodeDeadPeer
	case ReasonFrameDeadline:
		return frame.CodeFrameDeadline
	case ReasonHandshake:
		return frame.CodeHandshake
	case ReasonMaxAge:
		return frame.CodeMaxAge
	case ReasonWriteStall:
		return frame.CodeWriteStall
	case ReasonGiveUp:
		return frame.CodeGiveUp
	case ReasonProtocol:
		return frame.CodeProtocol
	case ReasonTooLarge:
		return frame.CodeTooLarge
	case ReasonOverload:
		return frame.CodeOverload
	case ReasonPanic:
		return frame.CodeInternal
	case ReasonOutputLimit:
		return frame.CodeOutputLimit
	case ReasonUnackedLimit:
		return frame.CodeUnackedLimit
	case ReasonPingFlood:
		return frame.CodePingFlood
	}
	return 0
}

func fromIdle(r idle.Reason) Reason {
	switch r {
	case idle.ReasonIdle:
		return ReasonIdle
	case idle.ReasonDeadPeer:
		return ReasonDeadPeer
	case idle.ReasonKeepalive:
		return ReasonKeepalive
	case idle.ReasonFrameDeadline:
		return ReasonFrameDeadline
	case idle.ReasonHandshake:
		return ReasonHandshake
	case idle.ReasonMaxAge:
		return ReasonMaxAge
	case idle.ReasonWriteStall:
		return ReasonWriteStall
	}
	return ReasonError
}
