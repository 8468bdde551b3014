package wheel

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Layout of Timer.state. One word holds everything a resetter decides on, so
// every transition is a single compare-and-swap:
//
//	bit  0      pending: armed and not yet fired or stopped
//	bit  1      queued:  on the wheel's inbox, where the wheel takes it in
//	             within takeEvery, or takeLead before its deadline
//	bit  2      filed:   linked into a slot at a tick no later than the
//	             deadline below (not on the due list: see handle)
//	bit  3      counted: included in the wheel's pending count (wheel-owned)
//	bit  4      exact:   the deadline was computed from an exact instant, so
//	             the timer fires at the deadline's tick; without it the
//	             deadline came from the coarse clock (see clock.go)
//	bits 5-22   for a coarse deadline, its age code: how many ticks after
//	             the tick it was read from the deadline lies (see ageCode)
//	bits 23-63  the deadline, in ticks since the wheel started
const (
	statePending = 1 << 0
	stateQueued  = 1 << 1
	stateFiled   = 1 << 2
	stateCounted = 1 << 3
	stateExact   = 1 << 4

	ageShift = 5
	ageBits  = 18

	whenShift = ageShift + ageBits
	whenBits  = 64 - whenShift
	maxWhen   = 1<<whenBits - 1 // a deadline the clock never reaches (see horizon)

	keepMask = stateQueued | stateFiled | stateCounted
)

// Timer is one timeout in a Wheel. Its zero value is not usable: create one
// with Wheel.AfterFunc, or embed a Timer in your own struct and call Init.
//
// A Timer's methods may be called from any goroutine, concurrently, including
// from the Timer's own callback. None of them allocates.
//
// Ownership: state and delta are shared, and change only atomically (state
// by compare-and-swap). w and f are written once by Init before the Timer is
// published and read freely after. next and prev belong to the wheel's
// goroutine (or to the goroutine calling ManualClock.Advance). qnext is
// written by the one goroutine that set stateQueued, before it publishes the
// Timer on the inbox, and read by the wheel after it takes the inbox.
type Timer struct {
	state atomic.Uint64
	delta atomic.Uint64 // coarseDelta of the last duration's ticks: see cachedFor
	w     *Wheel
	f     func()

	next, prev *Timer // slot list, circular through a sentinel; nil when unlinked
	qnext      *Timer
}

// Init binds t to w with callback f, leaving it stopped. It lets a Timer be
// embedded in a larger struct (a connection, say) and armed with Reset without
// any allocation. Init must be called once, before any other method, and
// before t is shared with other goroutines; it panics if w or f is nil or if
// t was already initialized.
func (t *Timer) Init(w *Wheel, f func()) {
	if w == nil || f == nil {
		panic("wheel: Timer.Init with nil wheel or callback")
	}
	if t.w != nil {
		panic("wheel: Timer.Init called twice")
	}
	t.w = w
	t.f = f
	t.delta.Store(coarseDelta(0)) // a valid cache (for d = 0): see cachedFor
}

// Reset arms t to fire once, d from now, whether or not it is pending, and
// reports whether it was pending (so a false result means this call started a
// new arming). It is O(1), allocation-free, and takes no lock unless it must
// wake the wheel's sleeping goroutine (see Wheel.Wakeups):
//
//   - Within one tick, re-arming a pending timer with the same d costs three
//     loads, a little arithmetic and a compare.
//   - Moving a pending deadline later stores the new deadline, computed from
//     the wheel's coarse clock; the wheel notices when the old slot comes
//     round.
//   - Moving it earlier, or arming a stopped timer, also pushes t on the
//     wheel's lock-free inbox.
//
// The callback never runs before d has passed since the call, however late
// the wheel's goroutine runs. It normally runs no later than d rounded up to
// the tick, plus one tick, a quarter tick of slack and the time the coarse
// clock stayed on a tick past its end (see docs/design.md), plus the wheel
// goroutine's scheduling delay. (While the coarse clock is stale, Reset
// reads the monotonic clock instead, and the callback runs at the first tick
// at or after now+d, as for AfterFunc.) A d <= 0 fires on the next tick. A
// d longer than the wheel's range is clamped to it (see MaxDuration).
//
// If the wheel has been stopped, Reset changes nothing and reports whether
// t is pending, like Pending.
func (t *Timer) Reset(d time.Duration) bool {
	// The per-packet cases, on a fresh coarse clock with the same duration
	// as last time. The clock word holds the tick where a state word holds
	// its deadline, so the state armed from it is one add away (want > c:
	// the add did not run past the clock's end).
	if w := t.w; w != nil {
		c, k := w.clock.Load(), t.delta.Load()
		if want := c + k | statePending; c&clockSlow == 0 && want > c && cachedFor(k, d, w.tickNanos) {
			s := t.state.Load()
			switch {
			case s&^keepMask == want:
				return true // same tick: nothing to do
			case s&statePending != 0 && s&(stateFiled|stateQueued) != 0 && want>>whenShift >= s>>whenShift:
				if t.state.CompareAndSwap(s, want|s&keepMask) {
					// A later tick: store the deadline. The wheel finds it
					// when the slot it holds t in comes round (see arm), or
					// when it takes t in from the inbox, no later than the
					// deadline t was pushed with (see wakeBefore).
					return true
				}
			case s&statePending == 0:
				// A new arming: the wheel must count it (see arm).
				if t.state.CompareAndSwap(s, want|s&keepMask|stateQueued) {
					if s&stateQueued == 0 {
						w.push(t)
					} else {
						w.wakeBefore(want >> whenShift) // see arm
					}
					return false
				}
			}
		}
	}
	return t.reset(d)
}

// coarseDelta is what a deadline n ticks after tick base adds to base's
// clock word: the deadline base+1+n and the age code of n. Timer.delta
// caches it for the last duration, so that a reset with the same duration
// needs neither a division nor the age code.
func coarseDelta(n uint64) uint64 {
	return (n+1)<<whenShift | ageCode(n)<<ageShift
}

// cachedFor reports whether k, a coarseDelta cached in Timer.delta, is that
// of d: whether d rounds up to k's n ticks, (n-1)*tick < d <= n*tick. A
// negative d matches none (n*tick <= MaxDuration < 2^63); k must not be 0,
// which Init rules out.
func cachedFor(k uint64, d time.Duration, tickNanos int64) bool {
	top := (k>>whenShift - 1) * uint64(tickNanos)
	return uint64(d) <= top && uint64(d)+uint64(tickNanos) > top
}

// ageCode encodes n, the ticks from the tick a coarse deadline was computed
// from to the tick before the deadline, in 18 bits: exactly below 2^13, and
// rounded down to a multiple of 2^e otherwise (a 13-bit mantissa and a 5-bit
// exponent e). From the deadline and the code the wheel recovers a range of
// at most 2^e ticks (a 4 000th of the duration) that holds the tick the
// deadline was computed from, whatever its age; see ageRange.
func ageCode(n uint64) uint64 {
	e := uint64(bits.Len64(n >> 13))
	return e<<13 | n>>e
}

// ageRange returns the range of ticks [lo, hi] that holds the tick from
// which a coarse deadline when with age code code was computed.
func ageRange(when, code uint64) (lo, hi uint64) {
	e, m := code>>13, code&(1<<13-1)
	nlo, nhi := m<<e, (m+1)<<e-1
	hi = when - 1 - nlo
	if nhi >= when-1 {
		return 0, hi
	}
	return when - 1 - nhi, hi
}

func (t *Timer) reset(d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: Reset of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	c := w.clock.Load()
	switch {
	case c&clockStopped != 0:
		return t.Pending()
	case c&clockManual != 0:
		return t.arm(w.manualWhen(w.manual.now.Load(), d)<<whenShift | stateExact)
	case c&clockStale != 0 && t.state.Load()&statePending == 0:
		// A new arming on a stale clock: read the monotonic clock and arm
		// exactly. That is no sign that the coarse clock is read, so it
		// stays stale.
		return t.armExact(d)
	case c&clockStale != 0:
		// A coarse reader finds the clock stale: read the monotonic clock
		// once, arm exactly, and have the clock kept fresh again.
		now := w.sinceStart()
		w.refresh(c, now)
		return t.arm(w.exactWhen(now, d, w.tickOf(now))<<whenShift | stateExact)
	}
	now := c >> clockShift
	var n uint64
	if k := t.delta.Load(); cachedFor(k, d, w.tickNanos) {
		n = k>>whenShift - 1
	} else {
		n = t.ticks(d)
	}
	return t.arm(coarseWord(now, n, now))
}

// armExact arms t for d from now, read from the monotonic clock: the first
// tick at or after now+d.
func (t *Timer) armExact(d time.Duration) bool {
	w := t.w
	now := w.sinceStart()
	return t.arm(w.exactWhen(now, d, w.tickOf(now))<<whenShift | stateExact)
}

// coarseWord returns the state bits of a deadline n ticks after coarse tick
// base, while the clock reads tick now: base+1+n, but at least now+1 (a
// deadline already past fires on the next tick), clamped to the horizon,
// with the age code of the deadline from base.
func coarseWord(base, n, now uint64) uint64 {
	when := min(max(base+1+n, now+1), maxWhen)
	return when<<whenShift | ageCode(when-1-base)<<ageShift
}

// ResetFrom arms t like Reset, but to fire d after the instant from, a value
// returned earlier by Wheel.Now or by Wheel.Elapsed: it lets a policy stamp
// events on every packet and arm one timer later for the earliest of
// several deadlines. A deadline already past fires on the next tick. O(1),
// allocation-free, and no lock except to wake the wheel's goroutine; it
// reads no clock, except once after the wheel has slept (for a value from
// Now, to know that it is not in the future).
//
// A value from Now is a multiple of the tick, and the callback never runs
// before d has passed since any Now call that returned it, however long ago
// that was and however stale the coarse clock was then. Such a from must
// not lie in the future; it is clamped to the present.
//
// Any other value is taken as exact, as Elapsed returns it: the callback
// never runs before from+d, and normally runs at the first tick at or after
// it; up to a quarter tick after that tick when it joins a slot the
// wheel's goroutine processes a quarter tick late (one holding timers armed
// from the coarse clock), or when the goroutine already plans to wake
// within that quarter tick, on time, since such an arming does not wake it
// (docs/design.md, "Exact instants"). Event loops that read the monotonic clock anyway (once per
// event, as netserver does) arm their timers this way, and the wheel need
// not keep its coarse clock fresh for them. An Elapsed value that happens to be a
// multiple of the tick is taken as a Now value, which is always safe for it
// (at worst a little late).
//
// After the wheel has been stopped it changes nothing and reports whether t
// is pending.
func (t *Timer) ResetFrom(from, d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: ResetFrom of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	c := w.clock.Load()
	fromTick, rem := w.divTick(uint64(max(from, 0)))
	switch {
	case c&clockStopped != 0:
		return t.Pending()
	case c&clockManual != 0:
		return t.arm(w.manualWhen(min(int64(max(from, 0)), w.manual.now.Load()), d)<<whenShift | stateExact)
	case rem != 0:
		// Exact: the first tick at or after from+d.
		return t.arm(w.exactWhen(int64(from), d, c>>clockShift)<<whenShift | stateExact)
	}
	now := c >> clockShift
	if c&clockStale != 0 {
		// The stamp must not be in the future: read the clock to know.
		now = w.refresh(c, w.sinceStart())
	}
	return t.arm(coarseWord(min(fromTick, now), w.ticksCeil(d), now))
}

// ticks converts d to ticks and caches the conversion for the next Reset
// (for d from 0 to MaxDuration, where n*tick does not overflow).
func (t *Timer) ticks(d time.Duration) uint64 {
	n := t.w.ticksCeil(d)
	if d >= 0 && d <= t.w.maxDur {
		t.delta.Store(coarseDelta(n))
	}
	return n
}

// arm makes t pending with the deadline bits want (deadline, exact, age
// code). It pushes t on the inbox when the wheel must look at it: a new
// arming (the wheel counts it), or a timer the wheel holds at a tick later
// than the new deadline. A later deadline is only stored (unless it turns a
// coarse deadline exact): the wheel finds it when the slot it holds t in
// comes round, and files t again.
func (t *Timer) arm(want uint64) bool {
	want |= statePending
	when := want >> whenShift
	for {
		old := t.state.Load()
		if old&^keepMask == want {
			return true
		}
		next := want | old&keepMask
		push := false
		// A later deadline is only stored, unless it turns a coarse timer
		// exact: a coarse one may fire a quarter tick and a hold-back after
		// its tick (it may wait on the due list that long), and the driver
		// plans its sleep by that, later than the exact deadline may be.
		later := when >= old>>whenShift && !(old&stateExact == 0 && want&stateExact != 0)
		if old&stateQueued == 0 && (old&statePending == 0 || old&stateFiled == 0 || !later) {
			next |= stateQueued
			push = true
		}
		if t.state.CompareAndSwap(old, next) {
			if push {
				t.w.push(t)
			} else if old&stateQueued != 0 {
				// On the inbox already, pushed for another deadline (or
				// a stop): the driver may plan to sleep past this one.
				t.w.wakeBefore(when)
			}
			return old&statePending != 0
		}
	}
}

// Stop disarms t and reports whether it stopped a pending timer. A true
// result guarantees that the callback of the arming it stopped will not run;
// false means t had already fired (its callback may still be running) or was
// not armed. Stop is O(1), allocation-free and takes no lock unless it must
// wake the wheel's goroutine. The wheel drops its reference to t (so that
// t, and whatever embeds it, can be collected) within a second of the call:
// a Stop wakes the wheel's goroutine if it would sleep longer, and after
// such a wake-up the goroutine comes back within a second for the stops
// that follow, so that under churn it wakes one to four times a second.
func (t *Timer) Stop() bool {
	if t.w == nil {
		return false
	}
	for {
		old := t.state.Load()
		if old&statePending == 0 {
			return false
		}
		next := old &^ statePending
		push := old&stateQueued == 0
		if push {
			next |= stateQueued
		}
		if t.state.CompareAndSwap(old, next) {
			if push {
				t.w.push(t) // which also does the release check
			} else {
				t.w.released()
			}
			return true
		}
	}
}

// Pending reports whether t is armed and has not yet fired or been stopped.
func (t *Timer) Pending() bool {
	return t.state.Load()&statePending != 0
}
