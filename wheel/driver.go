package wheel

import (
	"math"
	"time"
)

// The driver: the wheel's goroutine. Each wake-up is one step: take in the
// inbox, fire what is due, and sleep until the next occupied slot, as
// sleepPlan decides, or until a push of an earlier deadline wakes it.

// releaseDelay bounds how long a stopped timer stays referenced by the
// wheel, and how long an arming waits to be counted (see Len). A push
// wakes the driver if it sleeps with no wake-up planned within
// releaseDelay (sleepLong), and after a wake-up that took in anything it
// sleeps no longer than releaseDelay, so that the pushes that follow need
// not wake it: under churn it wakes about once a releaseDelay for them,
// and a wheel whose timers are only moved later sleeps until its next
// timer.
const releaseDelay = int64(time.Second)

// preciseLead is how long before a timer falls due the driver starts
// sleeping precisely (see sleepPlan), in nanoseconds: more than the
// millisecond by which a runtime-timer sleep may end late.
const preciseLead = int64(2 * time.Millisecond)

func (w *Wheel) run() {
	defer close(w.done)
	defer w.countStops()
	for !w.stopped.Load() {
		w.wakeups.Add(1)
		until, precise := w.step(w.sinceStart())
		if w.stopped.Load() {
			return
		}
		w.park.sleep(until, w.sinceStart, precise)
	}
}

// step does one wake-up's work at time now (nanoseconds since start) and
// returns when the driver should wake next (math.MaxInt64: only when told
// to) and whether that sleep is to be precise.
func (w *Wheel) step(now int64) (int64, bool) {
	w.sleepUntil.Store(0) // awake: pushes need not wake us
	w.sleepLong.Store(false)
	// A push that woke us from a long sleep is taken in at once, to count
	// an arming and release a stop within releaseDelay.
	if w.pushWoke.Swap(false) || min(w.pushedAt(), w.releaseAt()) <= now {
		w.take(now)
	}
	w.expire(now)
	// Tell pushers when we wake, then plan again with what they pushed
	// before (callbacks' armings among them), until the plan holds: a push
	// from then on sees sleepUntil and wakes us if it needs us earlier,
	// and sees sleepLong. An arming already due goes to the next tick.
	var until int64
	var precise bool
	for {
		if w.pushedAt() <= now {
			w.take(now)
		}
		u, p := w.plan(now)
		if u == until {
			break
		}
		until, precise = u, p
		w.publishSleep(now, until)
	}
	w.endBatch()
	return until, precise
}

// take takes the inbox in (see drain). Until the driver must (pushedAt,
// releaseAt), a timer armed and stopped again, or armed many times, waits
// on the inbox and costs the driver nothing.
func (w *Wheel) take(now int64) {
	w.inMin.Store(maxWhen) // before the drain: a push meanwhile is seen twice at worst
	w.lastTake = now
	w.tookAny = w.drain() > 0
}

// pushedAt returns when the earliest deadline pushed since the last take
// falls due (math.MaxInt64: none).
func (w *Wheel) pushedAt() int64 { return w.whenTime(w.inMin.Load()) }

// releaseAt returns when the driver must take the inbox in to count
// armings and release stops (math.MaxInt64: only when woken):
// releaseDelay after the last take, if that took anything in (so that
// under churn pushes need not wake it) or anything waits.
func (w *Wheel) releaseAt() int64 {
	if w.tookAny || !w.in.empty() {
		return satAdd(w.lastTake, releaseDelay)
	}
	return math.MaxInt64
}

// plan returns when the driver wakes next, and whether precisely.
func (w *Wheel) plan(now int64) (int64, bool) {
	return sleepPlan(now, min(w.nextFire(), w.pushedAt()), w.releaseAt(), w.canPrecise)
}

// publishSleep tells pushers, at now, that the driver will sleep until
// until: a push wakes it for a deadline before that (sleepUntil), and any
// push if that is more than releaseDelay away (sleepLong).
func (w *Wheel) publishSleep(now, until int64) {
	w.sleepUntil.Store(max(until, 1))
	w.sleepLong.Store(until > satAdd(now, releaseDelay))
}

// sleepPlan decides when the driver wakes next, at now: at fireAt, when
// the next occupied slot's tick starts or a pushed timer falls due, or at
// releaseAt, whichever comes first (math.MaxInt64: never); canPrecise says
// whether it may sleep in futex. It returns the time to wake up and
// whether to sleep precisely.
//
// A sleep on the runtime's timer ends 0-1 ms late. When the wake-up is for
// a timer, the last preciseLead before it is slept in futex, which ends on
// time; a longer sleep first ends preciseLead early (on the runtime's
// timer, so no more than a millisecond later) to take the rest precisely.
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

// nextFire returns when the next occupied slot's tick starts
// (math.MaxInt64: there is none within the wheel's clock).
func (w *Wheel) nextFire() int64 {
	if tick, _, ok := w.lv.next(); ok {
		return w.whenTime(tick)
	}
	return math.MaxInt64
}

// whenTime returns the time of tick t, math.MaxInt64 from the clock's end.
func (w *Wheel) whenTime(t uint64) int64 {
	if t >= maxWhen {
		return math.MaxInt64
	}
	return w.tickTime(t)
}

// drain empties the inbox, filing, moving or dropping each timer on it
// (one already due goes to the next tick: it fires nothing), and returns
// how many it took.
func (w *Wheel) drain() (n int) {
	for i := range w.in.shards {
		t := w.in.take(i)
		for t != nil {
			next := t.qnext
			t.qnext = nil
			t.state.And(^uint64(stateQueued))
			n++
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
		if !ok || w.whenTime(tick) > now {
			break
		}
		w.lv.cur = tick
		w.expireSlot(idx)
	}
	// Every slot left starts after now, so its tick lies beyond this one.
	w.lv.cur = max(w.lv.cur, min(w.tickOf(now), maxWhen-1))
}

// expireSlot takes every timer out of slot idx, whose tick has come, and
// files, fires or drops it.
func (w *Wheel) expireSlot(idx int) {
	for t := w.lv.take(idx); t != nil; {
		next := t.next
		t.next, t.prev = nil, nil
		w.handle(t, true)
		t = next
	}
}

// handle decides the fate of an unlinked timer t: drop it if stopped, file
// it if its deadline is ahead, and if it is due fire it (fire is set when
// its slot's tick has come) or file it at the next tick (an arming taken
// in from the inbox, so that one re-armed for the past from its own
// callback fires once a tick, not in a loop); and keeps the pending count.
func (w *Wheel) handle(t *Timer, fire bool) {
	for {
		s := t.state.Load()
		if s&statePending == 0 {
			if s&stateCounted != 0 {
				if !t.state.CompareAndSwap(s, s&^stateCounted) {
					continue
				}
				w.addPending(-1)
			}
			return
		}
		if s&stateCounted == 0 {
			if !t.state.CompareAndSwap(s, s|stateCounted) {
				continue
			}
			w.addPending(1)
			s |= stateCounted
		}
		if when := s >> whenShift; when > w.lv.cur || !fire {
			w.lv.link(t, w.lv.slotFor(max(when, w.lv.cur+1)))
			return
		}
		if t.state.CompareAndSwap(s, s&^(statePending|stateCounted)) {
			w.addPending(-1)
			w.fired++
			if w.exec != nil {
				w.exec(t.f)
			} else {
				t.f()
			}
			return
		}
	}
}

func (w *Wheel) endBatch() {
	if w.fired > 0 {
		w.fired = 0
		if w.batchEnd != nil {
			w.batchEnd()
		}
	}
}

func (w *Wheel) addPending(d int64) {
	w.npending += d
	w.count.Store(w.npending)
}

// countStops runs as the driver exits, after Stop: it takes in what is
// still on the inbox, stops and armings, so that Len counts the timers that
// were pending when the wheel stopped. It fires nothing and links nothing.
func (w *Wheel) countStops() {
	for i := range w.in.shards {
		for t := w.in.take(i); t != nil; {
			next := t.qnext
			t.qnext = nil
			for {
				s := t.state.Load()
				n := s&^stateQueued | stateCounted
				if s&statePending == 0 {
					n &^= stateCounted
				}
				if t.state.CompareAndSwap(s, n) {
					if n&stateCounted > s&stateCounted {
						w.addPending(1) // an arming left on the inbox
					} else if n&stateCounted < s&stateCounted {
						w.addPending(-1)
					}
					break
				}
			}
			t = next
		}
	}
}
