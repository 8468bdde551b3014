package wheel

import (
	"sync"
	"sync/atomic"
	"time"
)

// ManualClock is a clock advanced by hand, for deterministic tests of code
// built on a Wheel. Pass it to New with WithClock; the wheel then starts no
// goroutine, and timers fire synchronously inside Advance, in deadline order,
// on the goroutine that calls Advance.
//
// A timer armed for d at time t fires at the first tick at or after t+d,
// and at least one tick after t (if its arming lands after an Advance from
// another goroutine passed that tick, at the next Advance's first tick).
type ManualClock struct {
	mu       sync.Mutex   // serializes Advance, and Wheel.Stop with it
	now      atomic.Int64 // nanoseconds since the clock was created
	attached atomic.Bool
	w        *Wheel // written by New under attached, read by Advance
}

// NewManualClock returns a clock reading zero.
func NewManualClock() *ManualClock { return new(ManualClock) }

// Now reports the time elapsed on the clock. Inside a callback it is the
// tick at which the callback fired.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Advance moves the clock forward by d (not at all for d <= 0) and fires,
// in deadline order, every timer that falls due on the way; while a
// callback runs, Now reports the tick it fired at. Timers armed by
// callbacks fire within the same Advance if they fall due within it (one
// re-armed for the past, at the next tick). Advance may not be called from
// a callback; concurrent calls are serialized. After the wheel has stopped
// it only moves the clock.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now.Load()
	target := satAdd(now, int64(max(d, 0)))
	w := c.w
	if w == nil {
		c.now.Store(target)
		return
	}
	targetTick := min(w.tickOf(target), maxWhen-1)
	for !w.stopped.Load() {
		w.drain()
		tick, idx, ok := w.lv.next()
		if !ok || tick > targetTick {
			break
		}
		now = max(now, w.tickTime(tick))
		c.now.Store(now)
		w.lv.cur = tick
		w.expireSlot(idx)
	}
	c.now.Store(target)
	w.lv.cur = max(w.lv.cur, targetTick)
	if w.fired > 0 && w.batchEnd != nil {
		w.batchEnd()
	}
	w.fired = 0
}
