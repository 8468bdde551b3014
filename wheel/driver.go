package wheel

import (
	"math"
	"time"
)

// The driver: the wheel's goroutine. Each wake-up is one step: take the
// inbox in if it must, fire what is due, and sleep as sleepPlan decides.

const (
	// releaseDelay bounds how long a stopped timer stays referenced, and
	// an arming uncounted (see Len): a push wakes a driver that plans no
	// wake-up within it (sleepLong), and after a take that found anything
	// the driver comes back within it, so that under churn it wakes about
	// once a releaseDelay, not once a push.
	releaseDelay = int64(time.Second)
	// preciseLead is how long before a timer falls due the driver sleeps
	// precisely: more than a runtime-timer sleep may end late.
	preciseLead = int64(2 * time.Millisecond)
)

func (w *Wheel) run() {
	defer close(w.done)
	defer w.drain() // so that Len counts what was pending at Stop
	for !w.stopped.Load() {
		w.wakeups.Add(1)
		until, precise := w.step(w.sinceStart())
		if w.stopped.Load() {
			return
		}
		w.park.sleep(until, w.sinceStart, precise)
	}
}

// step does one wake-up's work at now (nanoseconds since start) and returns
// when to wake next (math.MaxInt64: when told to), and whether precisely.
func (w *Wheel) step(now int64) (int64, bool) {
	w.sleepUntil.Store(0) // awake: pushes need not wake us
	w.sleepLong.Store(false)
	// A push that woke us from a long sleep is taken in at once.
	if w.pushWoke.Swap(false) || min(w.pushedAt(), w.releaseAt()) <= now {
		w.take(now)
	}
	w.expire(now)
	// Publish the plan, then plan again with what was pushed before
	// (callbacks' armings among them) until it holds: a later push sees
	// sleepUntil and sleepLong. An arming already due goes to the next tick.
	var until int64
	var precise bool
	for {
		if w.pushedAt() <= now {
			w.take(now)
		}
		u, p := sleepPlan(now, min(w.nextFire(), w.pushedAt()), w.releaseAt(), w.canPrecise)
		if u == until {
			break
		}
		until, precise = u, p
		w.sleepUntil.Store(max(until, 1))
		w.sleepLong.Store(until > satAdd(now, releaseDelay))
	}
	if w.fired > 0 && w.batchEnd != nil {
		w.batchEnd()
	}
	w.fired = 0
	return until, precise
}

// take takes the inbox in. Until it must (pushedAt, releaseAt), a timer
// armed and stopped many times waits there and costs the driver nothing.
func (w *Wheel) take(now int64) {
	w.inMin.Store(maxWhen) // before the drain: a push meanwhile is seen twice at worst
	w.lastTake = now
	w.tookAny = w.drain() > 0
}

// pushedAt returns when the earliest deadline pushed since the last take
// falls due.
func (w *Wheel) pushedAt() int64 { return w.tickTime(w.inMin.Load()) }

// releaseAt returns when the driver must take the inbox in to count
// armings and release stops: releaseDelay after the last take, if that
// found anything or anything waits.
func (w *Wheel) releaseAt() int64 {
	if w.tookAny || !w.in.empty() {
		return satAdd(w.lastTake, releaseDelay)
	}
	return math.MaxInt64
}

// sleepPlan decides when the driver wakes next, at now: at fireAt, when
// the next occupied slot's tick starts or a pushed timer falls due, or at
// releaseAt, whichever comes first (math.MaxInt64: never); canPrecise says
// whether it may sleep in futex. A sleep on the runtime's timer ends 0-1
// ms late, so the last preciseLead before a fire is slept in futex, which
// ends on time, and a longer sleep first ends preciseLead early.
func sleepPlan(now, fireAt, releaseAt int64, canPrecise bool) (until int64, precise bool) {
	until = min(fireAt, releaseAt)
	switch {
	case !canPrecise || fireAt == math.MaxInt64:
		return until, false
	case fireAt-now <= preciseLead:
		return until, true
	}
	return min(fireAt-preciseLead, releaseAt), false
}

// nextFire returns when the next occupied slot's tick starts.
func (w *Wheel) nextFire() int64 {
	if tick, _, ok := w.lv.next(); ok {
		return w.tickTime(tick)
	}
	return math.MaxInt64
}

// drain handles every timer on the inbox (firing none) and returns how
// many it took.
func (w *Wheel) drain() (n int) {
	for i := range w.in.shards {
		for t := w.in.take(i); t != nil; n++ {
			next := t.qnext
			t.qnext = nil
			t.state.And(^uint64(stateQueued))
			if t.next != nil {
				w.lv.unlink(t)
			}
			w.handle(t, false)
			t = next
		}
	}
	return n
}

// expire processes every slot due at now, then moves cur to now's tick.
func (w *Wheel) expire(now int64) {
	for {
		tick, idx, ok := w.lv.next()
		if !ok || w.tickTime(tick) > now {
			break
		}
		w.lv.cur = tick
		w.expireSlot(idx)
	}
	// Every slot left starts after now, so its tick lies beyond this one.
	w.lv.cur = max(w.lv.cur, min(w.tickOf(now), maxWhen-1))
}

// expireSlot handles every timer of slot idx, whose tick has come.
func (w *Wheel) expireSlot(idx int) {
	for t := w.lv.take(idx); t != nil; {
		next := t.next
		t.next, t.prev = nil, nil
		w.handle(t, true)
		t = next
	}
}

// handle drops an unlinked timer t if stopped, files it by its deadline,
// or if it is due fires it (fire: its slot's tick has come) or else files it
// at the next tick (so that a callback re-arming its timer for the past
// does not loop); and keeps the pending count.
func (w *Wheel) handle(t *Timer, fire bool) {
	for {
		s := t.state.Load()
		when := s >> whenShift
		due := s&statePending != 0 && fire && when <= w.lv.cur
		n := s | stateCounted
		if s&statePending == 0 || due {
			n = s &^ (statePending | stateCounted)
		}
		if n != s && !t.state.CompareAndSwap(s, n) {
			continue
		}
		if n&stateCounted != s&stateCounted {
			w.npending += int64(n>>2&1)*2 - 1 // stateCounted is bit 2
			w.count.Store(w.npending)
		}
		switch {
		case due:
			w.fired++
			if w.exec != nil {
				w.exec(t.f)
			} else {
				t.f()
			}
		case n&statePending != 0:
			w.lv.link(t, w.lv.slotFor(max(when, w.lv.cur+1)))
		}
		return
	}
}
