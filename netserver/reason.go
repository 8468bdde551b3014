package netserver

import (
	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver/frame"
)

// Reason says why a connection closed. The timeouts, ReasonIdle to
// ReasonWriteStall, are idle's, with its values and names (Reason(r)
// converts an idle.Reason); the reasons after them are the server's own.
// Its String names are stable, lower_snake_case metric labels.
type Reason uint8

// The reasons a connection closes. ReasonNone is the zero value: still open.
const (
	ReasonNone          = Reason(idle.ReasonNone)
	ReasonIdle          = Reason(idle.ReasonIdle)          // no application activity for IdleTimeout
	ReasonDeadPeer      = Reason(idle.ReasonDeadPeer)      // no inbound byte for ReadSilenceTimeout
	ReasonKeepalive     = Reason(idle.ReasonKeepalive)     // keepalive probes went unanswered
	ReasonFrameDeadline = Reason(idle.ReasonFrameDeadline) // a frame or request took longer than FrameTimeout
	ReasonHandshake     = Reason(idle.ReasonHandshake)     // the handshake took longer than HandshakeTimeout
	ReasonMaxAge        = Reason(idle.ReasonMaxAge)        // the connection outlived MaxAge and its grace period
	ReasonWriteStall    = Reason(idle.ReasonWriteStall)    // queued output made no progress within WriteStallTimeout
)

// The reasons only a server closes with.
const (
	ReasonPeerClosed     = Reason(idle.NumReasons) + iota // the peer closed (EOF, or a framed CLOSE)
	ReasonError                                           // a read or write failed (reset by peer, broken pipe)
	ReasonServerClosed                                    // the server's handler closed it
	ReasonShutdown                                        // the server shut down
	ReasonGiveUp                                          // retransmission gave up
	ReasonProtocol                                        // malformed input: a bad frame, type or sequence number
	ReasonTooLarge                                        // a frame or message longer than the limit
	ReasonOverload                                        // too many connections
	ReasonPanic                                           // the handler panicked
	ReasonOutputLimit                                     // queued output over its hard limit, or over its soft limit too long
	ReasonUnackedLimit                                    // unacknowledged data over its limit
	ReasonPingFlood                                       // PINGs faster than their limit
	ReasonApplication                                     // the handler closed it with a code of its protocol's own
	ReasonSourceLimit                                     // its source holds as many connections as one source may (Config.MaxConnsPerSource)
	ReasonProxyUntrusted                                  // the PROXY protocol is required and the peer is not a trusted proxy
	ReasonProxyMissing                                    // the PROXY protocol is required and the first bytes are not a PROXY header
	ReasonProxyInvalid                                    // a malformed PROXY header, or one of a version, command or family its specification does not define
	ReasonProxyTooLarge                                   // a PROXY header longer than the server accepts

	numReasons // sizes arrays indexed by Reason
)

var reasonNames = [numReasons]string{
	ReasonPeerClosed: "peer_closed", ReasonError: "error", ReasonServerClosed: "server_closed",
	ReasonShutdown: "shutdown", ReasonGiveUp: "retransmit_give_up", ReasonProtocol: "protocol_error",
	ReasonTooLarge: "frame_too_large", ReasonOverload: "overload", ReasonPanic: "handler_panic",
	ReasonOutputLimit: "output_limit", ReasonUnackedLimit: "unacked_limit", ReasonPingFlood: "ping_flood",
	ReasonApplication: "application", ReasonSourceLimit: "source_limit", ReasonProxyUntrusted: "proxy_untrusted",
	ReasonProxyMissing: "proxy_missing", ReasonProxyInvalid: "proxy_invalid", ReasonProxyTooLarge: "proxy_too_large",
}

// String returns the reason's metric label, such as "idle" or
// "peer_closed"; an unknown value gives "unknown".
func (r Reason) String() string {
	switch {
	case r < ReasonPeerClosed:
		return idle.Reason(r).String()
	case r < numReasons:
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons lists every reason a connection can close with (without
// ReasonNone), for pre-registering metric labels.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := Reason(1); r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// closeCodes holds the CLOSE frame code the server sends for each reason,
// or 0 for none (the peer closed, or the socket failed: nobody to tell).
var closeCodes = [numReasons]frame.Code{
	ReasonServerClosed: frame.CodeNormal, ReasonShutdown: frame.CodeShutdown, ReasonIdle: frame.CodeIdle,
	ReasonDeadPeer: frame.CodeDeadPeer, ReasonKeepalive: frame.CodeDeadPeer, ReasonFrameDeadline: frame.CodeFrameDeadline,
	ReasonHandshake: frame.CodeHandshake, ReasonMaxAge: frame.CodeMaxAge, ReasonWriteStall: frame.CodeWriteStall,
	ReasonGiveUp: frame.CodeGiveUp, ReasonProtocol: frame.CodeProtocol, ReasonTooLarge: frame.CodeTooLarge,
	ReasonOverload: frame.CodeOverload, ReasonPanic: frame.CodeInternal, ReasonOutputLimit: frame.CodeOutputLimit,
	ReasonUnackedLimit: frame.CodeUnackedLimit, ReasonPingFlood: frame.CodePingFlood,
	ReasonSourceLimit: frame.CodeSourceLimit, ReasonProxyUntrusted: frame.CodeProxyHeader, ReasonProxyMissing: frame.CodeProxyHeader,
	ReasonProxyInvalid: frame.CodeProxyHeader, ReasonProxyTooLarge: frame.CodeProxyHeader,
}

// closeCode is the CLOSE frame code the server sends for r (closeCodes).
func closeCode(r Reason) frame.Code {
	if r < numReasons {
		return closeCodes[r]
	}
	return 0
}
