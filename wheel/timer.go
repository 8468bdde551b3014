package wheel

import (
	"sync/atomic"
	"time"
)

// Layout of Timer.state. One word holds everything a resetter decides on, so
// every transition is a single compare-and-swap:
//
//	bit  0      pending: armed and not yet fired or stopped
//	bit  1      queued:  on the wheel's inbox; the wheel will look at it soon
//	bit  2      filed:   linked into a bucket (or the wheel's due/deferred list)
//	             at a tick no later than the deadline below
//	bits 3-20   the low 18 bits of the coarse tick the deadline was computed
//	             from (the base), used to undo a stale clock; see design.md
//	bits 21-63  the deadline, in ticks since the wheel started
const (
	statePending = 1 << 0
	stateQueued  = 1 << 1
	stateFiled   = 1 << 2

	baseShift = 3
	baseBits  = 18
	baseMask  = 1<<baseBits - 1

	whenShift = baseShift + baseBits
	whenBits  = 64 - whenShift
	maxWhen   = 1<<whenBits - 1

	keepMask = stateQueued | stateFiled
)

// Timer is one timeout in a Wheel. Its zero value is not usable: create one
// with Wheel.AfterFunc, or embed a Timer in your own struct and call Init.
//
// A Timer's methods may be called from any goroutine, concurrently, including
// from the Timer's own callback. None of them takes a lock or allocates.
//
// Ownership: state is shared and changes only by atomic compare-and-swap.
// w and f are written once by Init before the Timer is published and read
// freely after. next, prev and slot belong to the wheel's goroutine (or to the
// goroutine calling ManualClock.Advance). qnext is written by the one goroutine
// that set stateQueued, before it publishes the Timer on the inbox, and read by
// the wheel after it takes the inbox.
type Timer struct {
	state atomic.Uint64
	w     *Wheel
	f     func()

	next, prev *Timer
	qnext      *Timer
	slot       int32
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
	t.slot = noSlot
}

// Reset arms t to fire once, d from now, whether or not it is pending, and
// reports whether it was pending (so a false result means this call started a
// new arming). It is O(1), allocation-free and takes no lock:
//
//   - Within one tick, re-arming with the same d costs a load and a compare.
//   - Moving a pending deadline later only stores the new deadline; the wheel
//     notices when the old bucket comes round.
//   - Moving it earlier, or arming a stopped timer, also pushes t on the
//     wheel's lock-free inbox.
//
// The callback never runs before d has passed since the call, and normally
// runs no later than d rounded up to the tick, plus one tick, a quarter tick
// of slack and the wheel goroutine's scheduling delay. A d <= 0 fires on the
// next tick. A d longer than the wheel's range is clamped to it (see MaxDuration).
//
// If the wheel has been stopped, Reset does nothing and returns false.
// Reset reads no system clock except on the first call after the wheel has
// slept, which reads it once.
func (t *Timer) Reset(d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: Reset of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	c := w.clock.Load()
	if c&clockSlow != 0 {
		return t.resetSlow(d, c)
	}
	now := c >> clockShift
	return t.arm(now+1+w.ticksCeil(d, now), now)
}

// resetSlow handles a stale, manual or stopped clock.
func (t *Timer) resetSlow(d time.Duration, c uint64) bool {
	w := t.w
	switch {
	case c&clockStopped != 0:
		return false
	case w.manual != nil:
		nowNanos := w.manual.now.Load()
		now := uint64(nowNanos / w.tickNanos)
		when := now + 1
		if d > 0 {
			// The manual clock is exact, so the deadline is exact too:
			// the first tick at or after now+d.
			end := nowNanos + int64(min(d, w.maxDur))
			if e := uint64((end + w.tickNanos - 1) / w.tickNanos); e > when {
				when = e
			}
		}
		return t.arm(min(when, maxWhen), 0)
	default:
		now, ok := w.refresh(c)
		if !ok {
			return false
		}
		return t.arm(now+1+w.ticksCeil(d, now), now)
	}
}

// arm makes t pending with deadline when, computed from coarse tick base.
func (t *Timer) arm(when, base uint64) bool {
	want := when<<whenShift | (base&baseMask)<<baseShift | statePending
	for {
		old := t.state.Load()
		if old&^keepMask == want {
			return true // same tick, same deadline: nothing to do
		}
		next := want | old&keepMask
		push := false
		if old&stateQueued == 0 && (old&stateFiled == 0 || when < old>>whenShift) {
			// The wheel holds t at a tick later than the new deadline, or
			// not at all: tell it.
			next |= stateQueued
			push = true
		}
		if t.state.CompareAndSwap(old, next) {
			if push {
				t.w.push(t, when)
			}
			if old&statePending == 0 {
				t.w.pending.add(t, 1)
				return false
			}
			return true
		}
	}
}

// Stop disarms t and reports whether it stopped a pending timer. A true
// result guarantees that the callback of the arming it stopped will not run;
// false means t had already fired (its callback may still be running) or was
// not armed. Stop is O(1), allocation-free and takes no lock; the wheel drops
// its reference to t the next time it wakes.
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
		push := false
		if old&(stateQueued|stateFiled) == stateFiled {
			next |= stateQueued
			push = true
		}
		if t.state.CompareAndSwap(old, next) {
			t.w.pending.add(t, -1)
			if push {
				t.w.push(t, 0)
			}
			return true
		}
	}
}

// Pending reports whether t is armed and has not yet fired or been stopped.
func (t *Timer) Pending() bool {
	return t.state.Load()&statePending != 0
}
