package wheel

import "time"

// NewSimulated builds a real-clock wheel whose clock is now (nanoseconds
// since start) and whose driver does not run: the test calls Step where the
// goroutine would wake. It exercises the late-driver paths
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
	until, _ := w.StepPlan()
	return until
}

// StepPlan is Step, and also reports whether the sleep would be precise
// (in futex).
func (w *Wheel) StepPlan() (until int64, precise bool) {
	w.park.take()
	return w.step(w.sinceStart())
}

// when is the deadline ResetFrom(from, d) arms on a real-clock wheel.
func (w *Wheel) when(from int64, d time.Duration) uint64 {
	q, r := w.divTick(uint64(satAdd(from, int64(d))))
	return q + min(r, 1)
}

// SetCanPrecise overrides what New decided from GOMAXPROCS: whether the
// driver may sleep in futex before a timer falls due.
func (w *Wheel) SetCanPrecise(ok bool) { w.canPrecise = ok && w.park.precise }

const (
	SlotsPerLevel = slotsPerLevel
	NumLevels     = numLevels
)

// HavePreciseSleep reports whether this system takes precise sleeps in futex.
const HavePreciseSleep = haveFutex

// PreciseLead is how long before a timer is due the driver sleeps precisely.
const PreciseLead = time.Duration(preciseLead)

// ReleaseDelay bounds how long the wheel keeps a stopped timer referenced.
const ReleaseDelay = time.Duration(releaseDelay)

// SleepPlan is the driver's sleep decision, for table tests.
var SleepPlan = sleepPlan

// WakeRequested reports whether a wake-up of the driver is pending: for a
// simulated driver, whether the real one would be woken now.
func (w *Wheel) WakeRequested() bool { return w.park.state.Load() == 1 }

// Exit does what the driver does as it exits after Stop: it counts what is
// left on the inbox. A simulated wheel has no driver to do it.
func (w *Wheel) Exit() { w.drain() }
