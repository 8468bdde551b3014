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
	w.sleepUntil.Store(0) // awake: pushes and stops need not wake us
	w.sleepLong.Store(false)
	// A push woke us even if the inbox is empty now (a stop of a timer a
	// callback re-armed and took in): pushes are coming, and the next
	// sleep is short so that they need not wake us.
	took := w.pushWoke.Swap(false)
	took = w.drain() > 0 || took
	w.expire(now)
	// Tell pushers and stoppers when we wake, then look at the inbox again
	// (callbacks' armings among them): a push from then on sees sleepUntil
	// and wakes us if it needs us earlier, and sees sleepLong. What
	// came before is taken in now: an arming already due fires at the
	// next tick.
	until, precise := sleepPlan(now, w.nextFire(), took, w.canPrecise)
	w.publishSleep(now, until)
	took = w.drain() > 0 || took
	if u, p := sleepPlan(now, w.nextFire(), took, w.canPrecise); u < until {
		until, precise = u, p
		w.publishSleep(now, until)
	}
	w.endBatch()
	return until, precise
}

// publishSleep tells pushers, at now, that the driver will sleep until
// until: a push wakes it for a deadline before that (sleepUntil), and any
// push if that is more than releaseDelay away (sleepLong).
func (w *Wheel) publishSleep(now, until int64) {
	w.sleepUntil.Store(max(until, 1))
	w.sleepLong.Store(until > satAdd(now, releaseDelay))
}

// sleepPlan decides when the driver wakes next, from what a step found at
// now: fireAt, when the next occupied slot's tick starts (math.MaxInt64:
// none); took, whether this wake-up took in anything from the inbox (then
// it wakes within releaseDelay, so that pushes that follow are taken in
// without waking it); and canPrecise, whether it may sleep in futex. It
// returns the time to wake up and whether to sleep precisely.
//
// A sleep on the runtime's timer ends 0-1 ms late. When the wake-up is for
// a timer, the last preciseLead before it is slept in futex, which ends on
// time; a longer sleep first ends preciseLead early (on the runtime's
// timer, so no more than a millisecond later) to take the rest precisely.
func sleepPlan(now, fireAt int64, took, canPrecise bool) (until int64, precise bool) {
	until = fireAt
	if took {
		until = min(until, satAdd(now, releaseDelay))
	}
	if !canPrecise || fireAt > until || fireAt == math.MaxInt64 {
		return until, false
	}
	if fireAt-now <= preciseLead {
		return until, true
	}
	return fireAt - preciseLead, false
}

// nextFire returns when the next occupied slot's tick starts
// (math.MaxInt64: there is none within the wheel's clock).
func (w *Wheel) nextFire() int64 {
	if tick, _, ok := w.lv.next(); ok && tick < maxWhen {
		return w.tickTime(tick)
	}
	return math.MaxInt64
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
		if !ok || tick >= maxWhen || w.tickTime(tick) > now {
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
