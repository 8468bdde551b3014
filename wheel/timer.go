package wheel

import (
	"sync/atomic"
	"time"
)

// Layout of Timer.state. One word holds everything a resetter decides on, so
// every transition is a single compare-and-swap:
//
//	bit  0      pending: armed and not yet fired or stopped
//	bit  1      queued:  on the wheel's inbox
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
type Timer struct {
	// Shared; changes only atomically.
	state atomic.Uint64
	// Written by Init before the Timer is shared; only read afterwards.
	w *Wheel
	f func()

	// Owned by the driver.
	next, prev *Timer // slot list, circular through a sentinel; nil when unlinked
	// Written by the goroutine that set stateQueued, before it pushes the
	// Timer; read by the driver after it takes the inbox.
	qnext *Timer
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
// reports whether it was pending (false: this call started a new arming).
// It reads the clock and arms t as ResetFrom(w.Now(), d) does: at the first
// tick at or after now+d, never earlier; a d <= 0 fires on the next tick,
// and a d above MaxDuration is clamped to it.
func (t *Timer) Reset(d time.Duration) bool {
	if t.w == nil {
		panic("wheel: Reset of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	return t.ResetFrom(t.w.Now(), max(d, 1))
}

// ResetFrom arms t like Reset, but to fire d after the instant from, a value
// returned earlier by Wheel.Now: never before from+d, normally at the first
// tick at or after it; a deadline already past fires at the next tick. It
// reads no clock: an event loop reads it once per batch of events. The
// same tick again costs a few loads and a compare; a later deadline one
// compare-and-swap (the wheel finds it when the old slot comes round); an
// earlier one, or a new arming, also a push on the wheel's inbox.
//
// Reset and ResetFrom are O(1), allocation-free, and take no lock unless
// they must wake the wheel's goroutine; any goroutine may call them. After
// the wheel has been stopped they change nothing and report Pending.
func (t *Timer) ResetFrom(from, d time.Duration) bool {
	s := t.state.Load()
	if s&statePending != 0 && t.w.holds(s, from, d) {
		return true
	}
	return t.resetFrom(s, from, d)
}

// resetFrom is ResetFrom past the same-tick check on s, t's state word.
func (t *Timer) resetFrom(s uint64, from, d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: ResetFrom of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	when := w.deadline(from, d)
	if s&^keepMask == when<<whenShift|statePending || w.stopped.Load() {
		return s&statePending != 0 // armed for that tick already, or the wheel stopped
	}
	return t.arm(when)
}

// arm makes t pending with the deadline when (in ticks). It pushes t on the
// inbox for a new arming (the wheel counts it) or an earlier deadline; a
// later one is only stored, and the wheel files t again when the slot it
// holds t in comes round (or when it takes t in from the inbox).
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
// not armed. It is O(1), allocation-free and takes no lock unless it must
// wake the wheel's goroutine; any goroutine may call it. The wheel lets t
// go (to be collected) within a second.
func (t *Timer) Stop() bool {
	for { // an uninitialized Timer's state is 0: not pending
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
