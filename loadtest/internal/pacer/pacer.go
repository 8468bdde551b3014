// Package pacer computes open-loop send schedules: a fixed series of
// instants at a constant rate, fixed before the run starts. A sender that
// falls behind sends every due message at once, and latency is measured from
// each message's scheduled instant, not from when it was actually sent, so a
// slow server cannot hide its latency by slowing the senders down (the
// "coordinated omission" of closed-loop load generators).
//
// A Pacer is an immutable value: any goroutine may use it.
package pacer

import (
	"errors"
	"math"
	"time"
)

// ErrRate is returned by New for a rate that is not positive and finite.
var ErrRate = errors.New("pacer: rate must be positive and finite")

// Pacer is the schedule of message n (0, 1, 2, ...) at
// Start + Phase + n/Rate seconds.
type Pacer struct {
	start time.Time
	phase time.Duration
	rate  float64 // messages per second
}

// New returns the schedule of rate messages per second from start+phase.
// Spread the connections of a test over one interval with
// Phase(i, n): connection i of n starts i/n of an interval late.
func New(start time.Time, phase time.Duration, rate float64) (Pacer, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return Pacer{}, ErrRate
	}
	return Pacer{start: start, phase: max(phase, 0), rate: rate}, nil
}

// Phase returns the offset of connection i of n at rate messages per
// second: i/n of one interval, so that n connections do not send in bursts.
func Phase(i, n int, rate float64) time.Duration {
	if n <= 0 || !(rate > 0) {
		return 0
	}
	return time.Duration(float64(i%n) / float64(n) * 1e9 / rate)
}

// Interval returns the time between two messages.
func (p Pacer) Interval() time.Duration { return time.Duration(1e9 / p.rate) }

// Offset returns the instant of message n relative to Start. It is exact
// to the nanosecond for any n (no accumulated rounding).
func (p Pacer) Offset(n uint64) time.Duration {
	return p.phase + time.Duration(float64(n)*1e9/p.rate)
}

// At returns the scheduled instant of message n.
func (p Pacer) At(n uint64) time.Time { return p.start.Add(p.Offset(n)) }

// Due returns how many messages are due at elapsed time since Start: the
// number of n with Offset(n) <= elapsed.
func (p Pacer) Due(elapsed time.Duration) uint64 {
	if elapsed < p.phase {
		return 0
	}
	n := uint64(float64(elapsed-p.phase) * p.rate / 1e9)
	// Correct the float estimate by at most a step either way.
	for n > 0 && p.Offset(n-1) > elapsed {
		n--
	}
	for p.Offset(n) <= elapsed {
		n++
	}
	return n
}

// Count returns how many messages fall in [0, d) since Start: the length of
// a run of duration d.
func (p Pacer) Count(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return p.Due(d - 1)
}
