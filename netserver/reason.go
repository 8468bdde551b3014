package netserver

import (
	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver/frame"
)

// Reason says why a connection closed. It is idle.Reason: one vocabulary,
// with the same names and values, for idle's trackers and the server. Its
// String names are stable, lower_snake_case metric labels.
type Reason = idle.Reason

// The reasons a connection closes (see idle.Reason for each).
const (
	ReasonNone          = idle.ReasonNone
	ReasonPeerClosed    = idle.ReasonPeerClosed
	ReasonError         = idle.ReasonError
	ReasonServerClosed  = idle.ReasonServerClosed
	ReasonShutdown      = idle.ReasonShutdown
	ReasonIdle          = idle.ReasonIdle
	ReasonDeadPeer      = idle.ReasonDeadPeer
	ReasonKeepalive     = idle.ReasonKeepalive
	ReasonFrameDeadline = idle.ReasonFrameDeadline
	ReasonHandshake     = idle.ReasonHandshake
	ReasonMaxAge        = idle.ReasonMaxAge
	ReasonWriteStall    = idle.ReasonWriteStall
	ReasonGiveUp        = idle.ReasonGiveUp
	ReasonProtocol      = idle.ReasonProtocol
	ReasonTooLarge      = idle.ReasonTooLarge
	ReasonOverload      = idle.ReasonOverload
	ReasonPanic         = idle.ReasonPanic
	ReasonOutputLimit   = idle.ReasonOutputLimit
	ReasonUnackedLimit  = idle.ReasonUnackedLimit
	ReasonPingFlood     = idle.ReasonPingFlood
	ReasonApplication   = idle.ReasonApplication
	ReasonSourceLimit   = idle.ReasonSourceLimit
	// The PROXY protocol's refusals (Config.ProxyProtocol).
	ReasonProxyUntrusted = idle.ReasonProxyUntrusted
	ReasonProxyMissing   = idle.ReasonProxyMissing
	ReasonProxyInvalid   = idle.ReasonProxyInvalid
	ReasonProxyTooLarge  = idle.ReasonProxyTooLarge
)

// numReasons sizes arrays indexed by Reason.
const numReasons = idle.NumReasons

// Reasons lists every reason a connection can close with (without
// ReasonNone), for pre-registering metric labels.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := Reason(1); int(r) < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// closeCode is the CLOSE frame code the server sends for r, or 0 for none
// (the peer closed, or the socket failed: nobody to tell).
func closeCode(r Reason) frame.Code {
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
	case ReasonSourceLimit:
		return frame.CodeSourceLimit
	case ReasonProxyUntrusted, ReasonProxyMissing, ReasonProxyInvalid, ReasonProxyTooLarge:
		return frame.CodeProxyHeader
	}
	return 0
}
