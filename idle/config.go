package idle

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by Config.Validate, New, WrapConn and WrapListener, always
// wrapped with the name of the offending field; test them with errors.Is.
var (
	// ErrNegative: a duration or count is negative.
	ErrNegative = errors.New("idle: negative setting")
	// ErrKeepalive: the keepalive settings cannot work together.
	ErrKeepalive = errors.New("idle: keepalive settings cannot work")
	// ErrMaxAge: the max-age jitter is not smaller than MaxAge.
	ErrMaxAge = errors.New("idle: max age jitter not below max age")
	// ErrNoEffect: a setting can never take effect, because it depends on
	// one that is off or another timeout always fires first.
	ErrNoEffect = errors.New("idle: setting has no effect")
	// ErrHook: a Hooks function the configuration needs is nil.
	ErrHook = errors.New("idle: missing hook")
)

// Config selects the timeouts a Tracker enforces. Every zero value means
// "off", so the zero Config enforces nothing. Events are stamped with the
// wheel's clock (Wheel.Now), and a timeout never fires before its duration
// has passed since the event it is measured from; it normally fires at the
// first tick at or after that, plus the wheel's scheduling delay (exactly
// on time with a wheel.ManualClock and whole-tick durations). A deadline beyond
// the wheel's range (Wheel.MaxDuration after it started: 69 years at the
// default tick) is never enforced. A Config is a plain value: copy it
// freely; New keeps its own copy.
type Config struct {
	// IdleTimeout closes the connection (ReasonIdle) after no application
	// activity, as reported by Tracker.Activity, for this long. What counts
	// as activity is the caller's choice per event: keepalive answers
	// normally do not, as in HTTP/2 and gRPC.
	IdleTimeout time.Duration

	// ReadSilenceTimeout closes the connection (ReasonDeadPeer) after no
	// inbound byte, as reported by Tracker.BytesIn, for this long.
	ReadSilenceTimeout time.Duration

	// KeepaliveTime sends a probe through Hooks.Probe after this long
	// without an inbound byte. A probe is never sent while bytes arrive.
	KeepaliveTime time.Duration
	// KeepaliveTimeout is how long to wait for any inbound byte after each
	// probe. It is required when KeepaliveTime is set.
	KeepaliveTimeout time.Duration
	// KeepaliveCount is how many unanswered probes are sent, each
	// KeepaliveTimeout apart, before the connection closes with
	// ReasonKeepalive, KeepaliveTimeout after the last one. 0 means 1 (the
	// gRPC behaviour); Linux TCP keepalive sends 9.
	KeepaliveCount int

	// FrameTimeout bounds how long one frame (request, message) may take to
	// arrive, from its first byte (Tracker.FrameStart) to its completion
	// (Tracker.FrameEnd): ReasonFrameDeadline. The deadline is absolute:
	// bytes arriving in between do not extend it (the slowloris defence).
	FrameTimeout time.Duration

	// HandshakeTimeout closes the connection (ReasonHandshake) unless
	// Tracker.HandshakeDone is called within this long of New: a TLS
	// handshake or first-frame deadline.
	HandshakeTimeout time.Duration

	// MaxAge bounds a connection's lifetime, whatever it does. The age is
	// drawn once per connection, uniformly from [MaxAge-MaxAgeJitter,
	// MaxAge+MaxAgeJitter] (its upper end saturating at the largest
	// Duration), so that connections opened together do not all reconnect
	// together. When it is reached, Hooks.Drain is called (send a
	// GOAWAY, stop taking requests) and the connection is closed
	// MaxAgeGrace later with ReasonMaxAge; with no grace it closes at once.
	MaxAge       time.Duration
	MaxAgeJitter time.Duration // must be below MaxAge
	MaxAgeGrace  time.Duration

	// WriteStallTimeout closes the connection (ReasonWriteStall) when
	// output queued by Tracker.Written has not drained (Tracker.Drained)
	// within this long: the peer is not reading.
	WriteStallTimeout time.Duration

	// Jitter returns a uniform random integer in [0, n) for the max-age
	// jitter; results outside that range are clamped into it. nil uses
	// math/rand/v2. Tests inject a deterministic source here.
	Jitter func(n int64) int64
}

// Validate reports whether c makes sense, returning nil or an error that
// wraps one of ErrNegative, ErrKeepalive, ErrMaxAge or ErrNoEffect and names
// the field. It rejects:
//   - negative durations or counts;
//   - KeepaliveTimeout or KeepaliveCount without KeepaliveTime, and
//     KeepaliveTime without KeepaliveTimeout (a dead peer would never be
//     detected);
//   - KeepaliveTime not below ReadSilenceTimeout (the read-silence timeout
//     would always close before the first probe);
//   - MaxAgeJitter or MaxAgeGrace without MaxAge, and MaxAgeJitter >= MaxAge;
//   - any timeout at least as long as the longest possible lifetime
//     (MaxAge+MaxAgeJitter+MaxAgeGrace), which therefore could never fire.
//
// Validate is cheap and may be called from any goroutine.
func (c Config) Validate() error {
	durs := []struct {
		name string
		d    time.Duration
	}{
		{"IdleTimeout", c.IdleTimeout},
		{"ReadSilenceTimeout", c.ReadSilenceTimeout},
		{"KeepaliveTime", c.KeepaliveTime},
		{"KeepaliveTimeout", c.KeepaliveTimeout},
		{"FrameTimeout", c.FrameTimeout},
		{"HandshakeTimeout", c.HandshakeTimeout},
		{"MaxAge", c.MaxAge},
		{"MaxAgeJitter", c.MaxAgeJitter},
		{"MaxAgeGrace", c.MaxAgeGrace},
		{"WriteStallTimeout", c.WriteStallTimeout},
	}
	for _, f := range durs {
		if f.d < 0 {
			return fmt.Errorf("%w: %s is %v", ErrNegative, f.name, f.d)
		}
	}
	if c.KeepaliveCount < 0 {
		return fmt.Errorf("%w: KeepaliveCount is %d", ErrNegative, c.KeepaliveCount)
	}
	switch {
	case c.KeepaliveTime == 0 && c.KeepaliveTimeout != 0:
		return fmt.Errorf("%w: KeepaliveTimeout is set but KeepaliveTime is 0", ErrKeepalive)
	case c.KeepaliveTime == 0 && c.KeepaliveCount != 0:
		return fmt.Errorf("%w: KeepaliveCount is set but KeepaliveTime is 0", ErrKeepalive)
	case c.KeepaliveTime != 0 && c.KeepaliveTimeout == 0:
		return fmt.Errorf("%w: KeepaliveTime is set but KeepaliveTimeout is 0, so a dead peer is never detected", ErrKeepalive)
	case c.KeepaliveTime != 0 && c.ReadSilenceTimeout != 0 && c.KeepaliveTime >= c.ReadSilenceTimeout:
		return fmt.Errorf("%w: KeepaliveTime %v is not below ReadSilenceTimeout %v, so no probe is ever sent",
			ErrKeepalive, c.KeepaliveTime, c.ReadSilenceTimeout)
	}
	if c.MaxAge == 0 {
		if c.MaxAgeJitter != 0 {
			return fmt.Errorf("%w: MaxAgeJitter is set but MaxAge is 0", ErrNoEffect)
		}
		if c.MaxAgeGrace != 0 {
			return fmt.Errorf("%w: MaxAgeGrace is set but MaxAge is 0", ErrNoEffect)
		}
		return nil
	}
	if c.MaxAgeJitter >= c.MaxAge {
		return fmt.Errorf("%w: MaxAgeJitter %v, MaxAge %v", ErrMaxAge, c.MaxAgeJitter, c.MaxAge)
	}
	life := satAdd(satAdd(c.MaxAge, c.MaxAgeJitter), c.MaxAgeGrace)
	for _, f := range durs[:6] {
		if f.name != "KeepaliveTimeout" && f.d >= life {
			return fmt.Errorf("%w: %s %v is not below the longest lifetime %v (MaxAge+MaxAgeJitter+MaxAgeGrace)",
				ErrNoEffect, f.name, f.d, life)
		}
	}
	if c.WriteStallTimeout >= life {
		return fmt.Errorf("%w: WriteStallTimeout %v is not below the longest lifetime %v (MaxAge+MaxAgeJitter+MaxAgeGrace)",
			ErrNoEffect, c.WriteStallTimeout, life)
	}
	return nil
}

// satAdd adds two non-negative durations, saturating instead of overflowing.
func satAdd(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
