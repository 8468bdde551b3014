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
//	bit  2      filed:   linked into a bucket (or the wheel's due list) at a
//	             tick no later than the deadline below
//	bit  3      counted: included in the wheel's pending count (wheel-owned)
//	bit  4      exact:   the deadline was computed from an exact instant
//	             (ResetFrom with a value from Elapsed), so no stale clock
//	             can have made it early, and the base below is unused
//	bits 5-22   the low 18 bits of the coarse tick the deadline was computed
//	             from (the base), used to undo a stale clock; see design.md
//	bits 23-63  the deadline, in ticks since the wheel started
const (
	statePending = 1 << 0
	stateQueued  = 1 << 1
	stateFiled   = 1 << 2
	stateCounted = 1 << 3
	stateExact   = 1 << 4

	baseShift = 5
	baseBits  = 18
	baseMask  = 1<<baseBits - 1

	whenShift = baseShift + baseBits
	whenBits  = 64 - whenShift
	maxWhen   = 1<<whenBits - 1

	keepMask = stateQueued | stateFiled | stateCounted

	// Timer.dur caches the last duration (below 2^42ns, 73 minutes) and its
	// ticks (below 2^22), so a reset with the same duration needs no
	// arithmetic.
	durTickBits = 22
	durTickMask = 1<<durTickBits - 1
	durMaxNanos = 1 << (64 - durTickBits)
)

// Timer is one timeout in a Wheel. Its zero value is not usable: create one
// with Wheel.AfterFunc, or embed a Timer in your own struct and call Init.
//
// A Timer's methods may be called from any goroutine, concurrently, including
// from the Timer's own callback. None of them takes a lock or allocates.
//
// Ownership: state and dur are shared, and change only atomically (state by
// compare-and-swap). w and f are written once by Init before the Timer is
// published and read freely after. next and prev belong to the wheel's
// goroutine (or to the goroutine calling ManualClock.Advance). qnext is
// written by the one goroutine that set stateQueued, before it publishes the
// Timer on the inbox, and read by the wheel after it takes the inbox.
type Timer struct {
	state atomic.Uint64
	dur   atomic.Uint64
	w     *Wheel
	f     func()

	next, prev *Timer // bucket list, circular through a sentinel; nil when unlinked
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
// reports whether it was pending (so a false result means this call started a
// new arming). It is O(1), allocation-free and takes no lock:
//
//   - Within one tick, re-arming with the same d costs three loads and a
//     compare.
//   - Moving a pending deadline later only stores the new deadline; the wheel
//     notices when the old bucket comes round.
//   - Moving it earlier, or arming a stopped timer, also pushes t on the
//     wheel's lock-free inbox.
//
// The callback never runs before d has passed since the call, and normally
// runs no later than d rounded up to the tick, plus one tick, a quarter tick
// of slack and the wheel goroutine's scheduling delay (plus up to one more
// tick while the wheel naps because callers keep its clock with
// Wheel.CatchUp). A d <= 0 fires on the next tick. A d longer than the
// wheel's range is clamped to it (see MaxDuration).
//
// If the wheel has been stopped, Reset does nothing and returns false.
// Reset reads no system clock except on the first call after the wheel has
// slept, which reads it once.
func (t *Timer) Reset(d time.Duration) bool {
	// The per-packet case, small enough to be inlined: same duration as
	// last time, same tick, still pending. The clock word is laid out like
	// a state word armed from it, so the deadline is one add away.
	if w := t.w; w != nil {
		c, dc := w.clock.Load(), t.dur.Load()
		if c&clockSlow == 0 && dc>>durTickBits == uint64(d) &&
			t.state.Load()&^keepMask == c+(dc&durTickMask+1)<<whenShift|statePending {
			return true
		}
	}
	return t.reset(d)
}

func (t *Timer) reset(d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: Reset of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	c := w.clock.Load()
	if c&clockSlow != 0 {
		return t.resetSlow(d, c)
	}
	now := c >> clockShift
	var ticks uint64
	if dc := t.dur.Load(); dc>>durTickBits == uint64(d) {
		ticks = dc & durTickMask
	} else {
		ticks = t.ticks(d, now)
	}
	return t.arm(now+1+ticks, baseTag(now))
}

// ResetFrom arms t like Reset, but to fire d after the instant from, a value
// returned earlier by Wheel.Now or by Wheel.Elapsed: it lets a policy stamp
// events on every packet and arm one timer later for the earliest of
// several deadlines. A deadline already past fires on the next tick. O(1),
// allocation-free, no lock, and no clock read.
//
// A value from Now is a multiple of the tick, and the callback never runs
// before d has passed since any Now call that returned it (the wheel holds
// back timers by how long each coarse tick stayed visible, so this holds
// for every call that read that tick, the latest included). Such a from
// must not lie in the future; it is clamped to the present.
//
// Any other value is taken as exact, as Elapsed returns it: the callback
// never runs before from+d, and normally runs at the first tick at or after
// it, with neither a hold-back nor the quarter tick of slack a coarse
// reading needs, since no stale clock was read. Event loops that read the
// monotonic clock anyway (once per event, as netserver does) arm their
// timers this way, and the wheel need not keep its coarse clock fresh for
// them: it does not wake every tick while only such timers are reset. An Elapsed value that happens to be a
// multiple of the tick is taken as a Now value, which is always safe for
// it (at worst a little late).
func (t *Timer) ResetFrom(from, d time.Duration) bool {
	w := t.w
	if w == nil {
		panic("wheel: ResetFrom of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)")
	}
	c := w.clock.Load()
	fromTick, rem := w.divTick(uint64(max(from, 0)))
	switch {
	case c&clockStopped != 0:
		return false
	case w.manual != nil:
		return t.arm(w.manualWhen(min(int64(max(from, 0)), w.manual.now.Load()), d), 0)
	case rem != 0:
		// Exact: the first tick at or after from+d. No base: nothing
		// stale was read, so nothing is held back.
		end := satAdd(int64(from), int64(min(max(d, 0), w.maxDur)))
		return t.arm(w.ticksCeil(time.Duration(end), 0), stateExact)
	}
	now := c >> clockShift
	if c&clockStale != 0 {
		var ok bool
		if now, ok = w.refresh(c); !ok {
			return false
		}
	}
	base := min(fromTick, now)
	return t.arm(base+1+w.ticksCeil(d, base), baseTag(base))
}

// ticks converts d to ticks for a deadline from tick now, and caches small
// conversions for the next Reset.
func (t *Timer) ticks(d time.Duration, now uint64) uint64 {
	n := t.w.ticksCeil(d, now)
	if d > 0 && d < durMaxNanos && n <= durTickMask {
		t.dur.Store(uint64(d)<<durTickBits | n)
	}
	return n
}

// resetSlow handles a stale, manual or stopped clock.
func (t *Timer) resetSlow(d time.Duration, c uint64) bool {
	w := t.w
	switch {
	case c&clockStopped != 0:
		return false
	case w.manual != nil:
		return t.arm(w.manualWhen(w.manual.now.Load(), d), 0)
	default:
		now, ok := w.refresh(c)
		if !ok {
			return false
		}
		return t.arm(now+1+t.ticks(d, now), baseTag(now))
	}
}

// manualWhen is the deadline, in ticks, of a timer on a manual wheel armed
// for d from fromNanos (not after the clock's now): the clock is exact, so
// the deadline is too, the first tick at or after from+d, and at least the
// tick after now.
func (w *Wheel) manualWhen(fromNanos int64, d time.Duration) uint64 {
	end := fromNanos + int64(min(max(d, 0), w.maxDur))
	when := uint64((end + w.tickNanos - 1) / w.tickNanos)
	if now := uint64(w.manual.now.Load() / w.tickNanos); when <= now {
		when = now + 1
	}
	return min(when, maxWhen)
}

// baseTag returns the state bits that record coarse tick base.
func baseTag(base uint64) uint64 { return (base & baseMask) << baseShift }

// arm makes t pending with deadline when; tag says what it was computed
// from: baseTag of a coarse tick, or stateExact.
func (t *Timer) arm(when, tag uint64) bool {
	want := when<<whenShift | tag | statePending
	for {
		old := t.state.Load()
		if old&^keepMask == want {
			return true
		}
		next := want | old&keepMask
		push := false
		if old&stateQueued == 0 && (old&statePending == 0 || old&stateFiled == 0 || when < old>>whenShift) {
			// A new arming (the wheel counts it), or the wheel holds t at a
			// tick later than the new deadline: tell it.
			next |= stateQueued
			push = true
		}
		if t.state.CompareAndSwap(old, next) {
			if push {
				t.w.push(t, when)
			}
			return old&statePending != 0
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
		push := old&stateQueued == 0
		if push {
			next |= stateQueued
		}
		if t.state.CompareAndSwap(old, next) {
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
