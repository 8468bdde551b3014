package retransmit

import (
	"errors"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/internal/setting"
	"github.com/netwheel/netwheel/wheel"
)

// Off turns a give-up limit off. It is exactly -1, an untyped constant
// that fits a count and a duration alike; any other negative value is an
// error.
const Off = setting.Off

// Defaults applied to zero fields of Config.
const (
	DefaultInitialRTO     = time.Second            // RFC 6298 section 2.1
	DefaultMinRTO         = 200 * time.Millisecond // Linux's TCP_RTO_MIN, not RFC 6298's 1 s: see Config.MinRTO
	DefaultMaxRTO         = 60 * time.Second       // RFC 6298 section 2.5's lowest allowed cap
	DefaultMaxRetransmits = 10
	DefaultGiveUpAfter    = 30 * time.Second
	DefaultWindow         = 1024

	// MaxWindow is the largest Window a Config accepts.
	MaxWindow = 1 << 20

	// MaxSample is the longest RTT sample the Estimator uses; longer samples
	// are treated as MaxSample. It keeps the integer arithmetic far from
	// overflow (about 13 days, never reached by a live connection).
	MaxSample = time.Duration(1 << 50)
)

// Variant selects how the minimum RTO is applied.
type Variant uint8

const (
	// RFC6298 clamps the computed RTO to [MinRTO, MaxRTO]:
	// RTO = min(MaxRTO, max(MinRTO, SRTT + max(G, 4*RTTVAR))).
	RFC6298 Variant = iota

	// Linux applies MinRTO as a floor on the variance term instead, as the
	// Linux TCP stack does (its rttvar never drops below tcp_rto_min):
	// RTO = min(MaxRTO, SRTT + max(G, 4*RTTVAR, MinRTO)). On a path with a
	// stable RTT this keeps the RTO MinRTO above SRTT, where RFC6298 lets it
	// fall to SRTT+G once SRTT exceeds MinRTO. The RTO never falls below
	// MinRTO either way, since SRTT >= 0.
	Linux
)

// String returns "rfc6298" or "linux".
func (v Variant) String() string {
	if names := [...]string{RFC6298: "rfc6298", Linux: "linux"}; int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("Variant(%d)", uint8(v))
}

// Config configures an Estimator and a Tracker. One rule holds for every
// field, as in every netwheel configuration: zero means the default
// documented on it, and Off (exactly -1) turns a limit off; any other
// negative value is an error naming the field. Only the give-up limits,
// MaxRetransmits and GiveUpAfter, can be off; the RTO parameters and
// Window cannot, and a negative one, like a contradiction, makes Validate,
// NewEstimator and NewTracker fail with an error wrapping
// ErrInvalidConfig. WithDefaults shows what a Config resolves to. The
// Estimator reads only the first five fields.
type Config struct {
	// InitialRTO is the RTO before the first RTT sample (0: 1 s). It is
	// clamped into [MinRTO, MaxRTO].
	InitialRTO time.Duration
	// MinRTO is the floor of the RTO under RFC6298, or of the variance
	// term under Linux (0: 200 ms, under either Variant). The default
	// follows Linux, not RFC 6298 section 2.4, which says an RTO below 1 s
	// SHOULD be rounded up to 1 s: set MinRTO to time.Second for that.
	MinRTO time.Duration
	// MaxRTO caps the RTO, backoff included (0: 60 s). It must be at least
	// MinRTO. RFC 6298 asks for at least 60 s; smaller values are accepted.
	MaxRTO time.Duration
	// Granularity is the clock granularity G of RFC 6298: the floor of the
	// variance term. 0 means the wheel's tick for a Tracker and
	// wheel.DefaultTick (1 ms) for a standalone Estimator.
	Granularity time.Duration
	// Variant selects RFC6298 (the zero value) or Linux.
	Variant Variant

	// MaxRetransmits is how many times the Tracker retransmits the oldest
	// unacknowledged message before giving up on its next timeout
	// (0: 10; Off: no limit on the count).
	MaxRetransmits int
	// GiveUpAfter is how long a message may stay unacknowledged, counted
	// from its first transmission, before the Tracker gives up (0: 30 s;
	// Off: no limit on the time). With both limits off a Tracker never
	// gives up: the connection's other timeouts must end it.
	GiveUpAfter time.Duration
	// Window bounds the span of outstanding sequence numbers, from the
	// lowest unacknowledged one to the highest sent (0: 1024; at most
	// MaxWindow). Sent fails with ErrWindowFull beyond it.
	Window int
}

// Errors returned by this package. All are comparable with errors.Is.
var (
	// ErrInvalidConfig is wrapped by every configuration error.
	ErrInvalidConfig = errors.New("retransmit: invalid config")
	// ErrWindowFull is returned by Tracker.Sent when Window sequence
	// numbers are already outstanding.
	ErrWindowFull = errors.New("retransmit: window full")
	// ErrSequence is returned by Tracker.Sent when seq is not one more than
	// the previous seq.
	ErrSequence = errors.New("retransmit: sequence out of order")
	// ErrStopped is returned by Tracker.Sent after the tracker gave up or
	// was stopped.
	ErrStopped = errors.New("retransmit: tracker stopped")

	// ErrGiveUp is matched by every *GiveUpError.
	ErrGiveUp = errors.New("retransmit: give up")
	// ErrMaxRetransmits is matched by a *GiveUpError caused by
	// Config.MaxRetransmits.
	ErrMaxRetransmits = errors.New("retransmit: too many retransmissions")
	// ErrUnackedTimeout is matched by a *GiveUpError caused by
	// Config.GiveUpAfter.
	ErrUnackedTimeout = errors.New("retransmit: unacknowledged too long")
)

// GiveUpError is the close reason a Tracker delivers to Hooks.GiveUp.
// errors.Is matches it against ErrGiveUp and against Limit.
type GiveUpError struct {
	// Limit is ErrMaxRetransmits or ErrUnackedTimeout: which limit was hit.
	Limit error
	// Seq is the oldest unacknowledged message.
	Seq uint64
	// Retransmits is how many times Seq was retransmitted.
	Retransmits int
	// Unacked is how long Seq had been outstanding, since its first
	// transmission.
	Unacked time.Duration
}

// Error describes the limit and the message it was hit on.
func (e *GiveUpError) Error() string {
	return fmt.Sprintf("retransmit: give up on seq %d after %d retransmissions, %v unacknowledged: %v",
		e.Seq, e.Retransmits, e.Unacked, e.Limit)
}

// Unwrap returns ErrGiveUp and Limit, so errors.Is matches both.
func (e *GiveUpError) Unwrap() []error { return []error{ErrGiveUp, e.Limit} }

// resolved is a validated Config with defaults applied, in nanoseconds,
// and the give-up limits that are off as values never reached.
type resolved struct {
	initialNanos, minNanos, maxNanos, granNanos int64
	linux                                       bool
	maxRetransmits                              int
	giveUpNanos                                 int64
	window                                      int
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// Validate reports whether NewEstimator and NewTracker would accept c: nil,
// or an error wrapping ErrInvalidConfig that names the field. It may be
// called from any goroutine.
func (c Config) Validate() error {
	_, err := c.WithDefaults(0)
	return err
}

// WithDefaults returns c as an Estimator or a Tracker on a wheel of the
// given tick runs it, or the error NewEstimator and NewTracker would
// return: every zero field replaced by its default (Granularity by tick;
// a zero tick means wheel.DefaultTick, as for a standalone Estimator),
// InitialRTO clamped into [MinRTO, MaxRTO], and a give-up limit that is
// Off left Off. A negative value other than Off, and Off where a field
// cannot be off, is an error naming the field; so is, on a wheel (tick not
// 0), a deadline shorter than its tick, which it cannot keep: MaxRTO,
// InitialRTO as clamped, GiveUpAfter (MinRTO, a floor, may be). The result resolves to
// itself. It is the one place where this package's defaults are applied:
// a layer above calls it rather than copying them. It allocates only for
// an error and may be called from any goroutine.
func (c Config) WithDefaults(tick time.Duration) (Config, error) {
	for _, f := range []struct {
		name string
		d    time.Duration
		off  bool
	}{
		{"InitialRTO", c.InitialRTO, false}, {"MinRTO", c.MinRTO, false}, {"MaxRTO", c.MaxRTO, false},
		{"Granularity", c.Granularity, false}, {"GiveUpAfter", c.GiveUpAfter, true},
	} {
		check := setting.CheckOn[time.Duration]
		if f.off {
			check = setting.Check[time.Duration]
		}
		if err := check(f.name, f.d); err != nil {
			return c, invalid("%w", err)
		}
		if f.d > MaxSample {
			return c, invalid("%s %v exceeds %v", f.name, f.d, MaxSample)
		}
	}
	for _, err := range []error{setting.Check("MaxRetransmits", c.MaxRetransmits), setting.CheckOn("Window", c.Window)} {
		if err != nil {
			return c, invalid("%w", err)
		}
	}
	if c.Variant != RFC6298 && c.Variant != Linux {
		return c, invalid("unknown %v", c.Variant)
	}
	if c.Window > MaxWindow {
		return c, invalid("Window %d outside [0, %d]", c.Window, MaxWindow)
	}
	c.MinRTO = setting.Or(c.MinRTO, DefaultMinRTO)
	c.MaxRTO = setting.Or(c.MaxRTO, DefaultMaxRTO)
	if c.MinRTO > c.MaxRTO {
		return c, invalid("MinRTO %v exceeds MaxRTO %v", c.MinRTO, c.MaxRTO)
	}
	c.InitialRTO = min(max(setting.Or(c.InitialRTO, DefaultInitialRTO), c.MinRTO), c.MaxRTO)
	c.Granularity = setting.Or(c.Granularity, setting.Or(tick, wheel.DefaultTick))
	c.MaxRetransmits = setting.Or(c.MaxRetransmits, DefaultMaxRetransmits)
	c.GiveUpAfter = setting.Or(c.GiveUpAfter, DefaultGiveUpAfter)
	c.Window = setting.Or(c.Window, DefaultWindow)
	if tick > 0 {
		for _, f := range []struct {
			name string
			d    time.Duration
		}{{"MaxRTO", c.MaxRTO}, {"InitialRTO", c.InitialRTO}, {"GiveUpAfter", c.GiveUpAfter}} {
			if err := setting.CheckTick(f.name, f.d, tick); err != nil {
				return c, invalid("%w", err)
			}
		}
	}
	return c, nil
}

// resolve is c as WithDefaults(tick) resolves it, in the form the
// Estimator and the Tracker read.
func (c Config) resolve(tick time.Duration) (resolved, error) {
	c, err := c.WithDefaults(tick)
	if err != nil {
		return resolved{}, err
	}
	r := resolved{
		initialNanos:   int64(c.InitialRTO),
		minNanos:       int64(c.MinRTO),
		maxNanos:       int64(c.MaxRTO),
		granNanos:      int64(c.Granularity),
		linux:          c.Variant == Linux,
		maxRetransmits: setting.Bound(c.MaxRetransmits),
		giveUpNanos:    int64(c.GiveUpAfter),
		window:         c.Window,
	}
	if c.GiveUpAfter == Off {
		r.giveUpNanos = giveUpNever
	}
	return r, nil
}

// giveUpNever is the give-up time of GiveUpAfter Off: beyond any RTO
// (MaxSample), and far enough from overflow when added to a send time.
const giveUpNever = 1 << 62
