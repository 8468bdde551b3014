package retransmit

import (
	"time"
)

// Estimator computes a retransmission timeout (RTO) from round-trip time
// samples as RFC 6298 specifies, with alpha = 1/8, beta = 1/4 and K = 4, in
// integer nanoseconds. Create one with NewEstimator; its zero value is not
// usable.
//
// Arithmetic and rounding. Every quantity is an int64 count of nanoseconds
// and every division rounds down (all operands are non-negative):
//
//	first sample R:  SRTT = R
//	                 RTTVAR = floor(R / 2)
//	later sample R:  RTTVAR = floor((3*RTTVAR + |SRTT - R|) / 4)   (old SRTT)
//	                 SRTT   = floor((7*SRTT + R) / 8)
//	RFC6298:         base = min(MaxRTO, max(MinRTO, SRTT + max(G, 4*RTTVAR)))
//	Linux:           base = min(MaxRTO, SRTT + max(G, 4*RTTVAR, MinRTO))
//	before a sample: base = InitialRTO, clamped into [MinRTO, MaxRTO]
//	RTO:             min(MaxRTO, base * 2^Backoffs)
//
// Each update rounds once, so the truncation error stays below 1 ns per
// sample and never accumulates beyond a few nanoseconds. A timer armed for
// the RTO on a wheel fires at the first tick boundary at or after the
// deadline, so the effective timeout is the RTO rounded up to the wheel's
// tick (plus scheduling delay on a real clock).
//
// An Estimator has no synchronization of its own: call its methods from
// one goroutine at a time.
type Estimator struct {
	// Plain data, owned by the caller of the methods (a Tracker's under
	// its lock).
	cfg resolved

	srttNanos, rttvarNanos, latestNanos int64
	baseNanos                           int64 // RTO before backoff
	samples                             uint64
	backoffs                            int
}

// NewEstimator returns an Estimator with no sample yet, whose RTO is the
// initial RTO. It reads InitialRTO, MinRTO, MaxRTO, Granularity (0 means
// wheel.DefaultTick) and Variant, and validates the whole of cfg; an invalid
// cfg gives an error wrapping ErrInvalidConfig.
func NewEstimator(cfg Config) (*Estimator, error) {
	r, err := cfg.resolve(0) // no wheel: Granularity's default is wheel.DefaultTick, and no deadline is kept
	if err != nil {
		return nil, err
	}
	e := &Estimator{}
	e.init(r)
	return e, nil
}

func (e *Estimator) init(r resolved) {
	*e = Estimator{cfg: r, baseNanos: r.initialNanos}
}

// Sample feeds one RTT measurement taken from a message that was not
// retransmitted (Karn's rule is the caller's duty; a Tracker applies it).
// It updates SRTT and RTTVAR, recomputes the RTO and clears the backoff
// (RFC 6298 section 5.7's note: a valid sample ends the backoff). A negative
// rtt is ignored and Sample reports false; an rtt above MaxSample counts as
// MaxSample; zero is valid (an ack at the instant of the send). O(1),
// allocation-free.
func (e *Estimator) Sample(rtt time.Duration) bool {
	if rtt < 0 {
		return false
	}
	r := int64(min(rtt, MaxSample))
	if e.samples == 0 {
		e.srttNanos = r
		e.rttvarNanos = r / 2
	} else {
		diff := e.srttNanos - r
		if diff < 0 {
			diff = -diff
		}
		e.rttvarNanos = (3*e.rttvarNanos + diff) / 4
		e.srttNanos = (7*e.srttNanos + r) / 8
	}
	e.samples++
	e.latestNanos = r
	e.backoffs = 0
	variance := max(e.cfg.granNanos, 4*e.rttvarNanos)
	if e.cfg.linux {
		variance = max(variance, e.cfg.minNanos)
	}
	e.baseNanos = min(e.cfg.maxNanos, max(e.cfg.minNanos, e.srttNanos+variance))
	return true
}

// Backoff records a retransmission timeout: the RTO doubles (RFC 6298
// section 5.5), capped at MaxRTO, and stays doubled until the next Sample.
// It returns the new RTO. O(1), allocation-free; the count saturates
// instead of overflowing.
func (e *Estimator) Backoff() time.Duration {
	if e.backoffs < 1<<30 {
		e.backoffs++
	}
	return e.RTO()
}

// RTO reports the current retransmission timeout, backoff included. It lies
// within [MinRTO, MaxRTO].
func (e *Estimator) RTO() time.Duration {
	return time.Duration(e.rtoNanos())
}

func (e *Estimator) rtoNanos() int64 {
	// base > 0 (it is at least MinRTO > 0), so base<<b <= max exactly when
	// base <= max>>b.
	b := e.backoffs
	if b >= 63 || e.baseNanos > e.cfg.maxNanos>>b {
		return e.cfg.maxNanos
	}
	return e.baseNanos << b
}

// SRTT reports the smoothed RTT, or 0 before the first sample.
func (e *Estimator) SRTT() time.Duration { return time.Duration(e.srttNanos) }

// RTTVar reports the RTT variation, or 0 before the first sample.
func (e *Estimator) RTTVar() time.Duration { return time.Duration(e.rttvarNanos) }

// LatestRTT reports the last sample used (after clamping to MaxSample), or
// 0 before the first sample.
func (e *Estimator) LatestRTT() time.Duration { return time.Duration(e.latestNanos) }

// Samples reports how many samples have been used.
func (e *Estimator) Samples() uint64 { return e.samples }

// Backoffs reports how many times the RTO has doubled since the last
// sample.
func (e *Estimator) Backoffs() int { return e.backoffs }
