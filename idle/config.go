package idle

import (
	"errors"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/internal/setting"
)

// Errors returned by Config.Validate, NewTracker and idleconn's wrappers,
// always wrapped with the name of the offending field; test them with errors.Is.
var (
	// ErrNegative: a setting is negative but not Off (exactly -1), or
	// negative at all where it cannot be off (KeepaliveCount).
	ErrNegative = errors.New("idle: negative setting")
	// ErrTooShort: a timeout is shorter than the wheel's tick, the finest
	// deadline the wheel keeps (NewTracker, idleconn.WrapConn).
	ErrTooShort = errors.New("idle: timeout shorter than the tick")
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

// Off turns a setting off. It is exactly -1, an untyped constant that fits
// a duration and a count alike; any other negative value is an error.
const Off = setting.Off

// The defaults that zero fields of a Config stand for. Together they make
// sure that no peer holds a connection for ever, whether it is silent,
// trickles bytes or a frame, or does not read.
const (
	// DefaultIdleTimeout is longer than any pause of a live client;
	// keepalive answers do not count as activity.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultKeepaliveTime and DefaultKeepaliveTimeout find a half-open
	// peer (crashed host, cut path) about 40 s after it fell silent.
	DefaultKeepaliveTime    = 30 * time.Second
	DefaultKeepaliveTimeout = 10 * time.Second
	// DefaultFrameTimeout: a 64 KiB frame must come at 2 KiB/s or more.
	DefaultFrameTimeout = 30 * time.Second
	// DefaultHandshakeTimeout: a connection that has not proven itself
	// this long after it opened is a scanner or a held slot.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxAge and DefaultMaxAgeJitter close every connection after
	// about an hour, whatever it does: a peer that trickles a byte now and
	// then is active by the idle timeout's measure, yet holds no place for
	// ever. The jitter spreads the reconnections of connections opened
	// together.
	DefaultMaxAge       = time.Hour
	DefaultMaxAgeJitter = 6 * time.Minute
	// DefaultWriteStallTimeout: no queued byte drained for this long, the
	// peer is not reading.
	DefaultWriteStallTimeout = 30 * time.Second
)

// Config selects the timeouts a Tracker enforces. One rule holds for every
// field, as in every netwheel configuration: zero means the default the
// field documents, Off (exactly -1) turns the setting off, and any other
// negative value is an error naming the field. The zero Config therefore
// enforces the Default* timeouts; a default that could never fire next to
// the settings given (a timeout not below the longest lifetime that MaxAge
// allows, a keepalive time not below ReadSilenceTimeout) is left off
// instead of making them invalid. WithDefaults shows what a Config
// resolves to.
//
// A timeout never fires early (see Tracker); it normally fires at the
// first tick at or after its deadline, plus the wheel's scheduling delay.
// A deadline beyond the wheel's range (Wheel.MaxDuration: 69 years at the
// default tick) is never enforced. A Config is a plain value: copy it
// freely; NewTracker keeps its own copy.
type Config struct {
	// IdleTimeout closes the connection (ReasonIdle) after no application
	// activity, as reported by Tracker.Activity, for this long. What counts
	// as activity is the caller's choice per event: keepalive answers
	// normally do not, as in HTTP/2 and gRPC. 0 means DefaultIdleTimeout
	// (5 min); Off turns it off.
	IdleTimeout time.Duration

	// ReadSilenceTimeout closes the connection (ReasonDeadPeer) after no
	// inbound byte, as reported by Tracker.BytesIn, for this long. 0 means
	// the default, which is none (keepalive finds a dead peer); Off too.
	ReadSilenceTimeout time.Duration

	// KeepaliveTime sends a probe through Hooks.Probe after this long
	// without an inbound byte. A probe is never sent while bytes arrive.
	// 0 means DefaultKeepaliveTime (30 s) where there is a probe to send
	// (Hooks.Probe; Uses.Probe), none otherwise; Off turns it off.
	KeepaliveTime time.Duration
	// KeepaliveTimeout is how long to wait for any inbound byte after each
	// probe (0: DefaultKeepaliveTimeout, 10 s). It may not be off while
	// KeepaliveTime is on: a dead peer would never be detected.
	KeepaliveTimeout time.Duration
	// KeepaliveCount is how many unanswered probes are sent, each
	// KeepaliveTimeout apart, before the connection closes with
	// ReasonKeepalive, KeepaliveTimeout after the last one. 0 means 1 (the
	// gRPC behaviour); Linux TCP keepalive sends 9. It cannot be off, and
	// may not be negative.
	KeepaliveCount int

	// FrameTimeout bounds how long one frame (request, message) may take to
	// arrive, from its first byte (Tracker.FrameStart) to its completion
	// (Tracker.FrameEnd): ReasonFrameDeadline. The deadline is absolute:
	// bytes arriving in between do not extend it (the slowloris defence).
	// 0 means DefaultFrameTimeout (30 s); Off turns it off.
	FrameTimeout time.Duration

	// HandshakeTimeout closes the connection (ReasonHandshake) unless
	// Tracker.HandshakeDone is called within this long of NewTracker: a TLS
	// handshake or first-frame deadline. 0 means DefaultHandshakeTimeout
	// (10 s) for a Tracker from NewTracker, so call HandshakeDone when the
	// connection has proven itself, or set Off; a wrapped Conn (idleconn.WrapConn),
	// whose handshake nothing marks done unless the caller does, has none
	// unless it is set. Off turns it off.
	HandshakeTimeout time.Duration

	// MaxAge bounds a connection's lifetime, whatever it does. The age is
	// drawn once per connection, uniformly from [MaxAge-MaxAgeJitter,
	// MaxAge+MaxAgeJitter] (its upper end saturating at the largest
	// Duration), so that connections opened together do not all reconnect
	// together. When it is reached, Hooks.GoAway is called (send a
	// GOAWAY, stop taking requests) and the connection is closed
	// MaxAgeGrace later with ReasonMaxAge; with no grace it closes at once.
	// MaxAge 0 means DefaultMaxAge (1 h) with, if MaxAgeJitter is 0 too,
	// DefaultMaxAgeJitter (6 min); the default is left off when a timeout
	// given is not below its longest lifetime. Off turns it off. With a
	// MaxAge set, MaxAgeJitter 0 means none. MaxAgeGrace 0 (or Off) means
	// none.
	MaxAge       time.Duration
	MaxAgeJitter time.Duration // must be below MaxAge
	MaxAgeGrace  time.Duration

	// WriteStallTimeout closes the connection (ReasonWriteStall) when
	// output queued by Tracker.Written has not drained (Tracker.Drained)
	// within this long: the peer is not reading. 0 means
	// DefaultWriteStallTimeout (30 s); Off turns it off.
	WriteStallTimeout time.Duration

	// Jitter returns a uniform random integer in [0, n) for the max-age
	// jitter; results outside that range are clamped into it. nil uses
	// math/rand/v2. Tests inject a deterministic source here.
	Jitter func(n int64) int64
}

// Validate reports whether c makes sense, as WithDefaults(UsesAll)
// resolves it, returning nil or an error that wraps one of ErrNegative,
// ErrKeepalive, ErrMaxAge or ErrNoEffect and names the field. It rejects:
//   - a negative value other than Off (exactly -1), and a negative
//     KeepaliveCount, which cannot be off: a typo must not turn a
//     protection off;
//   - KeepaliveTimeout or KeepaliveCount set while KeepaliveTime is off,
//     and KeepaliveTime on with KeepaliveTimeout off (a dead peer would
//     never be detected);
//   - KeepaliveTime set and not below ReadSilenceTimeout (the read-silence
//     timeout would always close before the first probe);
//   - MaxAgeJitter or MaxAgeGrace set while MaxAge is off, and
//     MaxAgeJitter >= MaxAge;
//   - any timeout set at least as long as the longest possible lifetime
//     (MaxAge+MaxAgeJitter+MaxAgeGrace), which therefore could never fire.
//
// NewTracker also rejects a timeout shorter than the wheel's tick. Validate is
// cheap and may be called from any goroutine.
func (c Config) Validate() error {
	_, err := c.WithDefaults(UsesAll)
	return err
}

// Uses says which of the events that some defaults depend on the caller
// reports: a default applies only where it can take effect. A Tracker
// from NewTracker uses frames and the handshake, and a probe when Hooks.Probe is
// set; a wrapped Conn (idleconn.WrapConn) uses none of them.
type Uses struct {
	// Probe: the caller has a keepalive probe to send (Hooks.Probe), so
	// KeepaliveTime's default applies.
	Probe bool
	// Frames: the caller marks frames (Tracker.FrameStart, FrameEnd), so
	// FrameTimeout's default applies.
	Frames bool
	// Handshake: the caller marks its handshake done
	// (Tracker.HandshakeDone), so HandshakeTimeout's default applies.
	Handshake bool
	// Tick is the tick of the caller's wheel: a timeout shorter than it,
	// which the wheel cannot keep, is an error wrapping ErrTooShort. 0
	// does not check (Validate, which knows no wheel).
	Tick time.Duration
}

// UsesAll is a caller that reports every event: the Uses of Validate.
var UsesAll = Uses{Probe: true, Frames: true, Handshake: true}

// WithDefaults returns c as a Tracker of a caller that reports the events
// u runs it, or the error NewTracker would return: every zero field replaced by
// its default, and every setting that is off set to Off (KeepaliveCount,
// MaxAgeJitter and MaxAgeGrace to 0 when unused). A zero setting whose
// default does not apply to u (KeepaliveTime without a probe, FrameTimeout
// without frames, HandshakeTimeout without a handshake) stays 0, with its
// KeepaliveTimeout and KeepaliveCount: the caller does not run it, and
// takes the default once it reports the event. The result resolves to
// itself. It is the one place where this package's defaults are applied:
// a layer above calls it rather than copying them. It allocates only for
// an error and may be called from any goroutine.
func (c Config) WithDefaults(u Uses) (Config, error) {
	for i, p := range c.durations() {
		if err := setting.Check(fields[i].name, *p); err != nil {
			return c, fmt.Errorf("%w: %w", ErrNegative, err)
		}
	}
	if err := setting.CheckOn("KeepaliveCount", c.KeepaliveCount); err != nil {
		return c, fmt.Errorf("%w: %w", ErrNegative, err)
	}
	given := c
	maxAgeDefault := c.MaxAge == 0
	kaDefault := c.ReadSilenceTimeout <= 0 || DefaultKeepaliveTime < c.ReadSilenceTimeout
	c.IdleTimeout = setting.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.ReadSilenceTimeout = setting.Or(c.ReadSilenceTimeout, Off) // the default is none
	if u.Probe {
		c.KeepaliveTime = setting.Or(c.KeepaliveTime, setting.Unless(kaDefault, DefaultKeepaliveTime))
	}
	if u.Frames {
		c.FrameTimeout = setting.Or(c.FrameTimeout, DefaultFrameTimeout)
	}
	if u.Handshake {
		c.HandshakeTimeout = setting.Or(c.HandshakeTimeout, DefaultHandshakeTimeout)
	}
	c.WriteStallTimeout = setting.Or(c.WriteStallTimeout, DefaultWriteStallTimeout)
	c.MaxAge = setting.Or(c.MaxAge, DefaultMaxAge)
	if c.MaxAgeJitter == 0 && maxAgeDefault {
		c.MaxAgeJitter = DefaultMaxAgeJitter
	}
	c.MaxAgeJitter, c.MaxAgeGrace = max(c.MaxAgeJitter, 0), max(c.MaxAgeGrace, 0)
	switch {
	case c.KeepaliveTime > 0:
		c.KeepaliveTimeout = setting.Or(c.KeepaliveTimeout, DefaultKeepaliveTimeout)
		c.KeepaliveCount = max(c.KeepaliveCount, 1)
	case c.KeepaliveTime < 0 && c.KeepaliveTimeout == 0:
		c.KeepaliveTimeout = Off
	}
	// The default max age, and any default timeout, that could never
	// fire next to the settings given are left off.
	resolved, asGiven := c.durations(), given.durations()
	if maxAgeDefault && c.MaxAge > 0 {
		for i, p := range asGiven {
			if fields[i].timeout && *p > 0 && *p >= c.life() {
				c.MaxAge, c.MaxAgeJitter = Off, 0
				break
			}
		}
	}
	if c.MaxAge > 0 {
		for i, p := range resolved {
			if fields[i].timeout && *asGiven[i] == 0 && *p >= c.life() {
				*p = Off
			}
		}
	}
	if c.KeepaliveTime < 0 && given.KeepaliveTime == 0 { // its default, left off
		if given.KeepaliveTimeout == 0 {
			c.KeepaliveTimeout = Off
		}
		if given.KeepaliveCount == 0 {
			c.KeepaliveCount = 0
		}
	}
	if err := c.check(); err != nil {
		return c, err
	}
	for i, p := range c.durations() {
		if p == &c.MaxAgeJitter {
			continue // a spread, not a deadline
		}
		if err := setting.CheckTick(fields[i].name, *p, u.Tick); err != nil {
			return c, fmt.Errorf("%w: %w", ErrTooShort, err)
		}
	}
	return c, nil
}

// fields names the durations of a Config, in the order durations lists
// them, and marks the timeouts that the longest lifetime MaxAge allows
// bounds.
var fields = [10]struct {
	name    string
	timeout bool
}{
	{"IdleTimeout", true}, {"ReadSilenceTimeout", true}, {"KeepaliveTime", true}, {"KeepaliveTimeout", false},
	{"FrameTimeout", true}, {"HandshakeTimeout", true}, {"MaxAge", false}, {"MaxAgeJitter", false},
	{"MaxAgeGrace", false}, {"WriteStallTimeout", true},
}

// durations points at c's durations, in the order of their declaration.
func (c *Config) durations() [10]*time.Duration {
	return [10]*time.Duration{&c.IdleTimeout, &c.ReadSilenceTimeout, &c.KeepaliveTime, &c.KeepaliveTimeout,
		&c.FrameTimeout, &c.HandshakeTimeout, &c.MaxAge, &c.MaxAgeJitter, &c.MaxAgeGrace, &c.WriteStallTimeout}
}

// life is the longest lifetime c's MaxAge allows: MaxAge+MaxAgeJitter+MaxAgeGrace.
func (c Config) life() time.Duration {
	return satAdd(satAdd(c.MaxAge, c.MaxAgeJitter), c.MaxAgeGrace)
}

// check validates a resolved Config, which it does not change: its
// settings are on (positive), Off, or 0 where unused.
func (c Config) check() error {
	switch {
	case c.KeepaliveTime <= 0 && c.KeepaliveTimeout > 0:
		return fmt.Errorf("%w: KeepaliveTimeout is set but KeepaliveTime is off", ErrKeepalive)
	case c.KeepaliveTime <= 0 && c.KeepaliveCount != 0:
		return fmt.Errorf("%w: KeepaliveCount is set but KeepaliveTime is off", ErrKeepalive)
	case c.KeepaliveTime > 0 && c.KeepaliveTimeout < 0:
		return fmt.Errorf("%w: KeepaliveTime is on but KeepaliveTimeout is off, so a dead peer is never detected", ErrKeepalive)
	case c.KeepaliveTime > 0 && c.ReadSilenceTimeout > 0 && c.KeepaliveTime >= c.ReadSilenceTimeout:
		return fmt.Errorf("%w: KeepaliveTime %v is not below ReadSilenceTimeout %v, so no probe is ever sent",
			ErrKeepalive, c.KeepaliveTime, c.ReadSilenceTimeout)
	case c.MaxAge < 0 && c.MaxAgeJitter != 0:
		return fmt.Errorf("%w: MaxAgeJitter is set but MaxAge is off", ErrNoEffect)
	case c.MaxAge < 0 && c.MaxAgeGrace != 0:
		return fmt.Errorf("%w: MaxAgeGrace is set but MaxAge is off", ErrNoEffect)
	case c.MaxAge < 0:
		return nil
	case c.MaxAgeJitter >= c.MaxAge:
		return fmt.Errorf("%w: MaxAgeJitter %v, MaxAge %v", ErrMaxAge, c.MaxAgeJitter, c.MaxAge)
	}
	for i, p := range c.durations() {
		if fields[i].timeout && *p >= c.life() {
			return fmt.Errorf("%w: %s %v is not below the longest lifetime %v (MaxAge+MaxAgeJitter+MaxAgeGrace)",
				ErrNoEffect, fields[i].name, *p, c.life())
		}
	}
	return nil
}

// run is c resolved for a Tracker, in the form start reads: every setting
// that is off is 0.
func (c Config) run(u Uses) (Config, error) {
	r, err := c.WithDefaults(u)
	for _, p := range r.durations() {
		*p = max(*p, 0)
	}
	return r, err
}

// satAdd adds two non-negative durations, saturating instead of overflowing.
func satAdd(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
