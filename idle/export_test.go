package idle

import "time"

// AgeAt reports the instant, on the wheel's clock, at which max age is
// reached (0 if MaxAge is off).
func (t *Tracker) AgeAt() time.Duration {
	if t.optional == nil || t.optional.ageDur == 0 {
		return 0
	}
	return time.Duration(t.opened + t.optional.ageDur)
}

// WriteArmed reports whether a write-stall deadline is running.
func (t *Tracker) WriteArmed() bool { return t.write != nil && t.write.at.Load() != 0 }

// WriteTimerArmed reports whether a write-stall deadline is running and its
// timer is on the wheel: Written stores the deadline before it arms the
// timer, so a manual clock advanced in between would pass the deadline
// before the timer is armed, and the timer would fire only at the next
// Advance.
func (t *Tracker) WriteTimerArmed() bool { return t.WriteArmed() && t.write.timer.Pending() }

// LastActivity reports the wheel time of the last Activity.
func (t *Tracker) LastActivity() time.Duration { return time.Duration(t.lastAct.Load()) }

// LastIn reports the wheel time of the last inbound byte.
func (t *Tracker) LastIn() time.Duration { return time.Duration(t.lastIn.Load()) }

// HandshakePending reports whether a handshake deadline is running.
func (t *Tracker) HandshakePending() bool { return t.handshakeAt.Load() != 0 }

// CheckAt is the instant the policy timer is armed for, at now, for the
// deadline next; CheckGrid the grid it checks far deadlines on.
var CheckAt = checkAt

const CheckGrid = time.Duration(checkGrid)
