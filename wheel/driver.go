package wheel

import (
	"math"
	"time"
)

// The driver: the wheel's goroutine. Each wake-up is one step: publish the
// tick on the coarse clock, take in the inbox if it must (takeIn), fire what
// is due, and sleep until the next thing to do, decided by sleepPlan from
// what the step found and by when the inbox must be taken in (takeAt).

// releaseDelay bounds how long a stopped timer stays referenced by the
// wheel. The driver takes in the inbox (where a stop waits) within
// takeEvery of a wake-up that finds something there; a Stop wakes it if it
// sleeps with no wake-up planned within releaseDelay (sleepLong), and after
// a wake-up that took in stops it sleeps no longer than releaseDelay, so
// that the stops that follow need not wake it: under churn it wakes one to
// four times a releaseDelay, and a wheel that nobody stops sleeps until its
// next timer.
const releaseDelay = int64(time.Second)

// takeEvery and takeLead say when the driver takes in the inbox (see
// takeIn): at least every takeEvery while something waits there, and at
// least takeLead before the earliest deadline pushed. Between takes, a timer
// armed and stopped again, or armed many times, costs the driver nothing,
// and the driver leaves alone the cache lines of the timers the resetters
// are touching.
const (
	takeEvery = releaseDelay / 4
	takeLead  = releaseDelay / 4
)

// preciseLead is how long before a timer falls due the driver starts
// sleeping precisely (see sleepPlan), in nanoseconds: more than the
// millisecond by which a runtime-timer sleep may end late.
const preciseLead = int64(2 * time.Millisecond)

func (w *Wheel) run() {
	defer close(w.done)
	defer w.countStops()
	for w.clock.Load()&clockStopped == 0 {
		w.wakeups.Add(1)
		until, precise := w.step(w.sinceStart())
		if w.clock.Load()&clockStopped != 0 {
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
	nowTick := w.tickOf(now)
	if w.leftStale && w.clock.Load()&clockStale == 0 {
		// A reader found the clock stale and refreshed it: the coarse
		// clock is being read, so keep it fresh.
		w.lastActive = nowTick
	}
	w.leftStale = false
	w.publish(now)
	// A stop woke us even if the timer was armed again before the take
	// (it was still queued, so the arming pushed nothing): stops are
	// coming, and the next sleep is short so that they need not wake us.
	woken := w.stopWoke.Swap(false)
	stops := w.takeIn(now, woken)
	w.expire(now)

	// Tell pushers and stoppers when we wake, then look at the inbox again
	// (callbacks' armings among them): a push from then on sees sleepUntil
	// and wakes us if it needs us earlier, a stop sees sleepLong, and what
	// came before is taken in now if it must be, or planned for by takeAt.
	// New armings fall due no earlier than the next tick, so this never
	// fires anything. At the clock's last tick there is no clock to keep:
	// the next tick never comes (a wake-up planned for it would be past,
	// and the driver would spin), and the last stays on the clock fresh,
	// so that readers need not wake the driver either.
	keep := nowTick < lastTick && nowTick-w.lastActive < w.activeTicks
	stopped := stops > 0 || woken
	plan := func() (until int64, precise, leadIn bool) {
		until, precise, leadIn = sleepPlan(now, w.nextFire(), w.tickTime(nowTick+1), keep, stopped, w.canPrecise)
		// The inbox, if the driver is to leave it: a take due now is
		// the one below, which files what it takes for the plan after it.
		if at := w.takeAt(); at < until && at > now {
			// Within the precise window of a fire, the take's sleep
			// is precise too, or it may end past the fire.
			until, leadIn = at, false
		}
		return until, precise, leadIn
	}
	until, precise, leadIn := plan()
	w.publishSleep(now, until, precise, leadIn)
	if w.takeIn(now, false) > 0 {
		stopped = true
	}
	if u, p, l := plan(); u < until {
		until, precise = u, p
		w.publishSleep(now, until, precise, l)
	}
	w.endBatch()
	if !keep && nowTick < lastTick {
		w.markStale()
		w.leftStale = true
	}
	return until, precise
}

// publishSleep tells pushers and stoppers, at now, that the driver will
// sleep until until: a push wakes it for a deadline before that
// (sleepUntil), a Stop if that is more than releaseDelay away (sleepLong).
//
// sleepUntil's two low bits say how a push compares its deadline with
// until (see wakeBefore), moving until by 3 ns at most:
//
//   - sleepSlack: the sleep ends on time (precise: a wake-up within
//     preciseLead of a fire), or no sleep does (!canPrecise), so that
//     waking would plan one as late. A deadline up to a quarter tick (the
//     slack) before until does not wake the driver: it fires with the
//     slot it then processes, as a slot holding a coarse timer is, a
//     quarter tick after its tick; woken, the driver would file it there
//     and plan the same wake-up, once per push.
//   - sleepLeadIn: the sleep, on the runtime's timer, leads in to a
//     precise one, preciseLead before a fire. A deadline at most a quarter
//     tick before that fire (one that joins a late slot there) does not
//     wake the driver, for the reason above; an earlier one does, to plan
//     a precise sleep to it, since this one may end a millisecond late.
//   - neither: a deadline before until wakes the driver; one at until
//     (the next tick, for a driver keeping the clock) fires when the
//     driver wakes then, on the runtime's timer.
func (w *Wheel) publishSleep(now, until int64, precise, leadIn bool) {
	v := until &^ sleepModes
	switch {
	case precise || !w.canPrecise:
		v |= sleepSlack
	case leadIn:
		v |= sleepLeadIn
	}
	w.sleepUntil.Store(v)
	w.sleepLong.Store(until > satAdd(now, releaseDelay))
}

// The modes of a published sleep, in sleepUntil's low bits (publishSleep).
const (
	sleepSlack  = 1
	sleepLeadIn = 2
	sleepModes  = sleepSlack | sleepLeadIn
)

// sleepPlan decides when the driver wakes next, from what a step found at
// now: fireAt, the earliest time a timer may fire (math.MaxInt64: none);
// nextTick, when the next tick starts; keepClock, whether the driver keeps
// the coarse clock fresh (then it wakes every tick); tookStops, whether
// this wake-up took in stopped timers (then it wakes within releaseDelay,
// so that stops that follow are taken in without waking it: see
// releaseDelay); and canPrecise, whether it may sleep in futex. It returns
// the time to wake up, whether to sleep precisely, and whether the sleep
// leads in to a precise one (see publishSleep).
//
// A sleep on the runtime's timer ends 0-1 ms late. When the wake-up is for
// a timer, the last preciseLead before it is slept in futex, which ends on
// time; a longer sleep first ends preciseLead early (on the runtime's timer,
// so no more than a millisecond later) to take the rest precisely. Sleeps
// that only keep the clock stay on the runtime's timer: in futex the
// goroutine keeps its P, which costs the process CPU (WithSyscallSleep).
func sleepPlan(now, fireAt, nextTick int64, keepClock, tookStops, canPrecise bool) (until int64, precise, leadIn bool) {
	until = fireAt
	if tookStops {
		until = min(until, satAdd(now, releaseDelay))
	}
	if keepClock {
		until = min(until, nextTick)
	}
	if !canPrecise || fireAt > until || fireAt == math.MaxInt64 {
		return until, false, false
	}
	if fireAt-now <= preciseLead {
		return until, true, false
	}
	return fireAt - preciseLead, false, true
}

// nextFire returns the earliest time at which a timer the wheel holds may
// fire: when the next occupied slot is processed, or a timer on the due list
// may fire.
func (w *Wheel) nextFire() int64 {
	at := int64(math.MaxInt64)
	if tick, _, late, ok := w.lv.next(); ok && tick <= lastTick {
		at = w.slotTime(tick, late)
	}
	h := w.lv.due()
	for t := h.next; t != h; t = t.next {
		at = min(at, w.fireAt(t.state.Load()))
	}
	return at
}

// slotTime returns when a slot at tick may be processed: at the tick if it
// holds only exact timers, else a quarter tick later, when the coarse ones
// due at that tick may fire (less any hold-back, for which they wait on the
// due list).
func (w *Wheel) slotTime(tick uint64, late bool) int64 {
	at := w.tickTime(tick)
	if late {
		at = satAdd(at, w.slackNanos)
	}
	return at
}

// takeIn takes in the inbox (see drain) when it must, or when force is
// set, and returns how many stopped timers it took in. Timers armed from
// the coarse clock among them are a sign that the clock is being read
// (lastActive). It must take when takeEvery has passed since the last take,
// or when a pending timer pushed since then falls due within takeLead
// (inMin, lowered by wakeBefore); otherwise what waits there waits, and the
// driver plans to come back for it (takeAt). inMin is reset before the
// inbox is taken, so a deadline pushed meanwhile is at worst counted twice.
func (w *Wheel) takeIn(now int64, force bool) (stops int) {
	if !force && now-w.lastTake < int64(takeEvery) && w.tickTime(w.inMin.Load()) > satAdd(now, int64(takeLead)) {
		return 0
	}
	w.inMin.Store(maxWhen)
	w.lastTake = now
	coarse, stops := w.drain(now)
	if coarse > 0 {
		w.lastActive = w.tickOf(now) // timers armed from the coarse clock
	}
	return stops
}

// takeAt returns when the driver must next take in the inbox
// (math.MaxInt64: only when woken): takeLead before the earliest deadline
// pushed since the last take, and takeEvery after the last take if the
// inbox is not empty.
func (w *Wheel) takeAt() int64 {
	at := int64(math.MaxInt64)
	if m := w.inMin.Load(); m != maxWhen {
		at = w.tickTime(m) - int64(takeLead)
	}
	if !w.in.empty() {
		at = min(at, w.lastTake+int64(takeEvery))
	}
	return at
}

// drain empties the inbox, filing, moving, firing or dropping each timer on
// it, and returns how many of them were armed from the coarse clock (a sign
// that it is being read) and how many were stopped.
func (w *Wheel) drain(now int64) (coarse, stops int) {
	for i := range w.in.shards {
		t := w.in.take(i)
		for t != nil {
			next := t.qnext
			t.qnext = nil
			switch s := t.state.And(^uint64(stateQueued)); s & (statePending | stateExact) {
			case statePending:
				coarse++
			case 0, stateExact:
				stops++
			}
			if t.next != nil {
				w.lv.unlink(t)
			}
			w.handle(t, now)
			t = next
		}
	}
	return coarse, stops
}

// expire processes the due list and every slot due at now, then moves cur
// to the last tick whose every timer may have fired.
func (w *Wheel) expire(now int64) {
	w.expireSlot(slotDue, now)
	for {
		tick, idx, late, ok := w.lv.next()
		if !ok || tick > lastTick || w.slotTime(tick, late) > now {
			break
		}
		w.lv.cur = tick
		w.expireSlot(idx, now)
	}
	// Every slot left is due after now, so its tick lies beyond this one.
	if now >= w.slackNanos {
		w.lv.cur = max(w.lv.cur, w.tickOf(now-w.slackNanos))
	}
}

// expireSlot takes every timer out of slot idx and files, fires or drops it.
func (w *Wheel) expireSlot(idx int, now int64) {
	for t := w.lv.take(idx); t != nil; {
		next := t.next
		t.next, t.prev = nil, nil
		w.handle(t, now)
		t = next
	}
}

// handle decides the fate of an unlinked timer t: drop it if stopped, file
// it if its deadline is ahead, hold it on the due list if it may not fire
// yet, fire it if due; and keeps the pending count.
func (w *Wheel) handle(t *Timer, now int64) {
	for {
		s := t.state.Load()
		if s&statePending == 0 {
			if n := s &^ (stateFiled | stateCounted); n != s {
				if !t.state.CompareAndSwap(s, n) {
					continue
				}
				if s&stateCounted != 0 {
					w.addPending(-1)
				}
			}
			return
		}
		if n := s | stateFiled | stateCounted; n != s {
			if !t.state.CompareAndSwap(s, n) {
				continue
			}
			if s&stateCounted == 0 {
				w.addPending(1)
			}
			s = n
		}
		if when := s >> whenShift; when > w.lv.cur {
			w.lv.link(t, w.lv.slotFor(when), s&stateExact == 0)
			return
		}
		if w.fireAt(s) > now {
			// On the due list t waits out a hold-back, and the driver plans
			// by it. Not filed there, so that any arming pushes t and the
			// driver plans again: a later deadline stored lazily would be
			// planned by the old hold-back, or, on a tick not yet over, not
			// at all.
			if !t.state.CompareAndSwap(s, s&^stateFiled) {
				continue
			}
			w.lv.link(t, slotDue, false)
			return
		}
		if t.state.CompareAndSwap(s, s&^(statePending|stateFiled|stateCounted)) {
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
				n := s &^ stateQueued
				if s&statePending == 0 {
					n &^= stateCounted
				} else {
					n |= stateCounted // an arming left on the inbox
				}
				if t.state.CompareAndSwap(s, n) {
					if s&statePending == 0 && s&stateCounted != 0 {
						w.addPending(-1)
					} else if s&statePending != 0 && s&stateCounted == 0 {
						w.addPending(1)
					}
					break
				}
			}
			t = next
		}
	}
}
