package idle

import "time"

// AgeAt reports the instant, on the wheel's clock, at which max age is
// reached (0 if MaxAge is off).
func (t *Tracker) AgeAt() time.Duration { return time.Duration(t.ageAt) }

// WriteArmed reports whether a write-stall deadline is running.
func (t *Tracker) WriteArmed() bool { return t.writeAt.Load() != 0 }
