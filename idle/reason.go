package idle

// Reason says why a Tracker closed a connection: one of its timeouts.
// Its String names are short, stable and lower_snake_case, fit to be metric
// labels; its Error text is the same name, so fmt prints the label whichever
// method it picks. A Reason is an error so that the *idleconn.CloseError a
// wrapped Conn returns after a close can be tested with errors.Is(err,
// idle.ReasonIdle); that error's text carries the "idleconn:" prefix.
// netserver's Reason has these values and names, and adds the closes that
// only a server makes.
type Reason uint8

// The reasons a Tracker closes a connection. ReasonNone is the zero value:
// the connection is still open (or was stopped by its owner).
const (
	ReasonNone Reason = iota

	ReasonIdle          // no application activity for IdleTimeout
	ReasonDeadPeer      // no inbound byte for ReadSilenceTimeout
	ReasonKeepalive     // keepalive probes went unanswered
	ReasonFrameDeadline // a frame took longer than FrameTimeout to arrive
	ReasonHandshake     // HandshakeDone was not called within HandshakeTimeout
	ReasonMaxAge        // the connection outlived MaxAge and its grace period
	ReasonWriteStall    // queued output made no progress within WriteStallTimeout

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
}

// Timeout reports whether r is a timeout: a deadline passed without the
// event it waited for (idle, dead peer, keepalive, frame, handshake, write
// stall). ReasonMaxAge is not one: the connection did nothing wrong, and a
// caller that retries after timeouts must not retry it.
func (r Reason) Timeout() bool { return r != ReasonNone && r != ReasonMaxAge && r < numReasons }

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

// Reasons returns every reason a Tracker can report (all but ReasonNone),
// in declaration order: handy to pre-register metric labels.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := ReasonIdle; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}
