package wheel

import "time"

// NewSimulated builds a real-clock wheel whose clock is now (nanoseconds
// since start) and whose driver does not run: the test calls Step where the
// goroutine would wake. It exercises the stale-clock and late-driver paths
// deterministically.
func NewSimulated(now func() int64, opts ...Option) *Wheel {
	w := build(opts)
	w.nowFunc = now
	close(w.done) // Stop must not wait for a goroutine that never ran
	return w
}

// Step runs one wake-up of the driver at the simulated time and returns the
// time it would sleep until.
func (w *Wheel) Step() int64 {
	w.park.take()
	return w.step(w.sinceStart())
}

// Stale reports whether the coarse clock is marked stale.
func (w *Wheel) Stale() bool { return w.clock.Load()&clockStale != 0 }

// Hiccups reports how many late publishes the wheel remembers.
func (w *Wheel) Hiccups() int { return len(w.hiccups) }

const (
	SlotsPerLevel = slotsPerLevel
	NumLevels     = numLevels
)

// CatchUpSplit runs the first half of CatchUp (the clock swap) and returns
// the second (the record), so a test can run the driver in between.
func (w *Wheel) CatchUpSplit() (finish func(), ok bool) {
	r, ok := w.catchUpSwap()
	if !ok {
		return nil, false
	}
	return func() { w.catchUpRecord(r) }, true
}

// MaxHiccup reports the longest hold-back the wheel remembers.
func (w *Wheel) MaxHiccup() time.Duration {
	var m int64
	for _, h := range w.hiccups {
		m = max(m, h.extra)
	}
	return time.Duration(m)
}

// PreciseSleep reports whether the sleep the last Step asked for is to be
// taken precisely (in futex).
func (w *Wheel) PreciseSleep() bool { return w.precise }

// HavePreciseSleep reports whether this system takes precise sleeps in futex.
const HavePreciseSleep = haveFutex

// PreciseLead is how long before a timer is due the driver sleeps precisely.
const PreciseLead = time.Duration(preciseLead)
