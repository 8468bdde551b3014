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
//	bit  3      quick:   the wheel has a real clock and DefaultTick (set by Init)
//	bits 4-44   the deadline, in ticks since the wheel started
const (
	statePending = 1 << 0
	stateQueued  = 1 << 1
	stateCounted = 1 << 2
	stateQuick   = 1 << 3

	whenShift = 4
	maxWhen   = 1<<41 - 1                               // a deadline never reached (see MaxDuration)
	keepMask  = stateQueued | stateCounted | stateQuick // what an arming keeps
	quickMax  = (maxWhen - 2) * uint64(DefaultTick)     // from+d up to this: never clamped at 1 ms
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
	if w.quick {
		t.state.Store(stateQuick)
	}
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
// the wheel has been stopped they have no visible effect and report Pending.
func (t *Timer) ResetFrom(from, d time.Duration) bool {
	// At the default tick nothing but the compare-and-swap waits for t's state
	// word (a random timer's cache miss): the next call's miss overlaps it.
	const tick = uint64(DefaultTick)
	s := t.state.Load()
	x := uint64(from) + uint64(d) // no overflow where from, d >= 0
	if s&stateQuick != 0 && from|d >= 0 && x <= quickMax {
		when := (x + tick - 1) / tick // needs no s: on a random timer, no wait
		if s&^keepMask == when<<whenShift|statePending {
			return true // the same tick
		}
		if s&(statePending|stateQueued) == statePending && when > s>>whenShift &&
			t.state.CompareAndSwap(s, when<<whenShift|s&(keepMask|statePending)) {
			return true // later: only stored (on a stopped wheel, a change no one sees)
		}
		return t.arm(s, when)
	}
	if s&statePending != 0 && t.w.holds(s, from, d) {
		return true // the same tick
	}
	w := t.w
	if w == nil {
		panic("wheel: ResetFrom of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	return t.arm(s, w.deadline(from, d))
}

// arm makes t, whose state word was s, pending with the deadline when (in
// ticks). A new arming or an earlier deadline goes on the inbox; a later one
// is only stored, and the driver files t again when it comes across it.
func (t *Timer) arm(s, when uint64) bool {
	if t.w.stopped.Load() {
		return s&statePending != 0
	}
	want := when<<whenShift | statePending
	for s&^keepMask != want {
		if s&stateQueued != 0 || s&statePending != 0 && when > s>>whenShift {
			if t.state.CompareAndSwap(s, want|s&keepMask) {
				if s&stateQueued != 0 {
					// Pushed for another deadline, or a stop: wake a driver that plans to sleep past.
					t.w.wakeBefore(when)
				}
				return s&statePending != 0
			}
		} else if t.state.CompareAndSwap(s, want|s&keepMask|stateQueued) {
			t.w.push(t)
			return s&statePending != 0
		}
		s = t.state.Load()
	}
	return true
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
		if t.state.CompareAndSwap(old, old&^statePending|stateQueued) {
			if old&stateQueued == 0 {
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
func (t *Timer) Pending() bool { return t.state.Load()&statePending != 0 }
