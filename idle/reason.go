package idle

// Reason says why a connection closed: the one vocabulary of close reasons
// for idle's Tracker and Conn and for netserver, whose Reason is this type.
// Its String names are short, stable and lower_snake_case, fit to be metric
// labels; its Error text is the same name, so fmt prints the label whichever
// method it picks. A Reason is an error so that the *CloseError a wrapped
// Conn returns after a close can be tested with errors.Is(err,
// idle.ReasonIdle); that error's text carries the "idle:" prefix.
type Reason uint8

// The reasons a connection closes. ReasonNone is the zero value: the
// connection is still open (or was stopped by its owner). A Tracker reports
// only the timeouts, ReasonIdle to ReasonWriteStall (Reasons lists them);
// the others are a server's (netserver.Reasons lists them all).
const (
	ReasonNone Reason = iota

	ReasonIdle          // no application activity for IdleTimeout
	ReasonDeadPeer      // no inbound byte for ReadSilenceTimeout
	ReasonKeepalive     // keepalive probes went unanswered
	ReasonFrameDeadline // a frame took longer than FrameTimeout to arrive
	ReasonHandshake     // HandshakeDone was not called within HandshakeTimeout
	ReasonMaxAge        // the connection outlived MaxAge and its grace period
	ReasonWriteStall    // queued output made no progress within WriteStallTimeout

	ReasonPeerClosed   // the peer closed (EOF, or a framed CLOSE)
	ReasonError        // a read or write failed (reset by peer, broken pipe)
	ReasonServerClosed // the server's handler closed it
	ReasonShutdown     // the server shut down
	ReasonGiveUp       // retransmission gave up
	ReasonProtocol     // malformed input: a bad frame, type or sequence number
	ReasonTooLarge     // a frame or message longer than the limit
	ReasonOverload     // too many connections
	ReasonPanic        // the handler panicked
	ReasonOutputLimit  // queued output over its hard limit, or over its soft limit too long
	ReasonUnackedLimit // unacknowledged data over its limit
	ReasonPingFlood    // PINGs faster than their limit
	ReasonApplication  // the handler closed it with a code of its protocol's own

	ReasonSourceLimit    // its source holds as many connections as one source may
	ReasonProxyUntrusted // the PROXY protocol is required and the peer is not a trusted proxy
	ReasonProxyMissing   // the PROXY protocol is required and the first bytes are not a PROXY header
	ReasonProxyInvalid   // a malformed PROXY header, or one of a version, command or family its specification does not define
	ReasonProxyTooLarge  // a PROXY header longer than the server accepts

	numReasons
)

// NumReasons is one more than the largest Reason: an array indexed by
// Reason has NumReasons elements.
const NumReasons = int(numReasons)

var reasonNames = [numReasons]string{
	ReasonNone:          "none",
	ReasonIdle:          "idle",
	ReasonDeadPeer:      "dead_peer",
	ReasonKeepalive:     "keepalive",
	ReasonFrameDeadline: "frame_deadline",
	ReasonHandshake:     "handshake",
	ReasonMaxAge:        "max_age",
	ReasonWriteStall:    "write_stall",
	ReasonPeerClosed:    "peer_closed",
	ReasonError:         "error",
	ReasonServerClosed:  "server_closed",
	ReasonShutdown:      "shutdown",
	ReasonGiveUp:        "retransmit_give_up",
	ReasonProtocol:      "protocol_error",
	ReasonTooLarge:      "frame_too_large",
	ReasonOverload:      "overload",
	ReasonPanic:         "handler_panic",
	ReasonOutputLimit:   "output_limit",
	ReasonUnackedLimit:  "unacked_limit",
	ReasonPingFlood:     "ping_flood",
	ReasonApplication:   "application",

	ReasonSourceLimit:    "source_limit",
	ReasonProxyUntrusted: "proxy_untrusted",
	ReasonProxyMissing:   "proxy_missing",
	ReasonProxyInvalid:   "proxy_invalid",
	ReasonProxyTooLarge:  "proxy_too_large",
}

// Timeout reports whether r is a timeout: a deadline passed without the
// event it waited for (idle, dead peer, keepalive, frame, handshake, write
// stall). ReasonMaxAge is not one: the connection did nothing wrong, and a
// caller that retries after timeouts must not retry it.
func (r Reason) Timeout() bool {
	switch r {
	case ReasonIdle, ReasonDeadPeer, ReasonKeepalive, ReasonFrameDeadline, ReasonHandshake, ReasonWriteStall:
		return true
	}
	return false
}

// String returns the reason's metric label, such as "idle" or "dead_peer";
// an unknown value gives "unknown".
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Error returns the reason's name, as String does.
func (r Reason) Error() string { return r.String() }

// Reasons returns every reason a Tracker can report (the timeouts), in
// declaration order: handy to pre-register metric labels.
func Reasons() []Reason {
	rs := make([]Reason, 0, ReasonWriteStall)
	for r := ReasonIdle; r <= ReasonWriteStall; r++ {
		rs = append(rs, r)
	}
	return rs
}
