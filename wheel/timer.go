package wheel

import (
	"sync/atomic"
	"time"
)

// Layout of Timer.state. One word holds everything a resetter decides on, so
// every transition is a single compare-and-swap:
//
//	bit  0      pending: armed and not yet fired or stopped
//	bit  1      queued:  on the wheel's inbox, where the driver takes it in
//	             at its next wake-up
//	bit  2      counted: included in the wheel's pending count (wheel-owned)
//	bits 3-43   the deadline, in ticks since the wheel started
const (
	statePending = 1 << 0
	stateQueued  = 1 << 1
	stateCounted = 1 << 2

	whenShift = 3
	maxWhen   = 1<<41 - 1 // a deadline the wheel never reaches (see MaxDuration)

	keepMask = stateQueued | stateCounted
)

// Timer is one timeout in a Wheel. Its zero value is not usable: create one
// with Wheel.AfterFunc, or embed a Timer in your own struct and call Init.
//
// A Timer's methods may be called from any goroutine, concurrently, including
// from the Timer's own callback. None of them allocates.
//
// Ownership: state is shared and changes only by compare-and-swap (or, on
// the driver, atomic And). w and f are written once by Init before the
// Timer is published and read freely after. next and prev belong to the
// wheel's goroutine (or to the goroutine calling ManualClock.Advance).
// qnext is written by the one goroutine that set stateQueued, before it
// publishes the Timer on the inbox, and read by the wheel after it takes
// the inbox.
type Timer struct {
	state atomic.Uint64
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
}

// Reset arms t to fire once, d from now, whether or not it is pending, and
// reports whether it was pending (so a false result means this call started
// a new arming). It reads the monotonic clock once (or the ManualClock) and
// arms t for the first tick at or after now+d, as ResetFrom(w.Now(), d)
// does: the callback never runs before d has passed since the call, and
// normally runs at that tick plus the wheel goroutine's scheduling delay. A
// d <= 0 fires on the next tick; a d longer than MaxDuration is clamped to
// it. It is O(1), allocation-free, and takes no lock unless it must wake
// the wheel's goroutine: see ResetFrom for what it costs beyond the clock
// read. Any goroutine may call it. If the wheel has been stopped, Reset
// changes nothing and reports whether t is pending, like Pending.
func (t *Timer) Reset(d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: Reset of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	if w.stopped.Load() {
		return t.Pending()
	}
	if w.manual != nil {
		return t.arm(w.manualWhen(w.manual.now.Load(), d))
	}
	return t.arm(w.when(w.sinceStart(), max(d, 1)))
}

// ResetFrom arms t like Reset, but to fire d after the instant from, a value
// returned earlier by Wheel.Now: the callback never runs before from+d, and
// normally runs at the first tick at or after it. A deadline already past
// fires at once (at the next tick on a ManualClock). It reads no clock, so
// an event loop that reads the clock once per batch of events arms every
// timer of the batch for the price of a compare-and-swap; a policy can stamp
// events on every packet and arm one timer later for the earliest of
// several deadlines. Any goroutine may call it.
//
// It is O(1), allocation-free, and takes no lock unless it must wake the
// wheel's goroutine (see Wheel.Wakeups). Re-arming a pending timer for the
// tick it is armed for already costs a few loads and a compare; moving its
// deadline later stores the new deadline (the wheel finds it when the old
// slot comes round); moving it earlier, or arming a stopped timer, also
// pushes t on the wheel's lock-free inbox.
//
// After the wheel has been stopped it changes nothing and reports whether
// t is pending.
func (t *Timer) ResetFrom(from, d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: ResetFrom of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	if w.stopped.Load() {
		return t.Pending()
	}
	if w.manual != nil {
		return t.arm(w.manualWhen(int64(from), d))
	}
	return t.arm(w.when(int64(from), d))
}

// arm makes t pending with the deadline when (in ticks). It pushes t on the
// inbox when the wheel must look at it: a new arming (the wheel counts it),
// or a deadline earlier than the one t holds. A later deadline is only
// stored: the wheel finds it when the slot it holds t in comes round (or
// when it takes t in from the inbox), and files t again.
func (t *Timer) arm(when uint64) bool {
	want := when<<whenShift | statePending
	for {
		old := t.state.Load()
		if old&^keepMask == want {
			return true
		}
		next := want | old&keepMask
		push := old&stateQueued == 0 && (old&statePending == 0 || when < old>>whenShift)
		if push {
			next |= stateQueued
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
// wake the wheel's goroutine; any goroutine may call it. The wheel drops its
// reference to t (so that t, and whatever embeds it, can be collected)
// within a second of the call: a Stop wakes the wheel's goroutine if it
// would sleep longer, and after a wake-up that takes in stops or armings
// the goroutine comes back within a second for those that follow, so that
// under churn it wakes about once a second for them.
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
				t.w.queued()
			}
			return true
		}
	}
}

// Pending reports whether t is armed and has not yet fired or been stopped.
// Any goroutine may call it; it costs one atomic load.
func (t *Timer) Pending() bool {
	return t.state.Load()&statePending != 0
}
