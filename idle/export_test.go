package idle

import "time"

// AgeAt reports the instant, on the wheel's clock, at which max age is
// reached (0 if MaxAge is off).
func (t *Tracker) AgeAt() time.Duration {
	if t.more == nil || t.more.ageDur == 0 {
		return 0
	}
	return time.Duration(t.opened + t.more.ageDur)
}

// WriteArmed reports whether a write-stall deadline is running.
func (t *Tracker) WriteArmed() bool { return t.write != nil && t.write.at.Load() != 0 }

// LastActivity reports the wheel time of the last Activity.
func (t *Tracker) LastActivity() time.Duration { return time.Duration(t.lastAct.Load()) }

// LastIn reports the wheel time of the last inbound byte.
func (t *Tracker) LastIn() time.Duration { return time.Duration(t.lastIn.Load()) }

// HandshakePending reports whether a handshake deadline is running.
func (t *Tracker) HandshakePending() bool { return t.handshakeAt.Load() != 0 }
