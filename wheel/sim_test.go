package wheel_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/wheel"
)

// simTimer remembers, for its current arming, when the real (simulated) clock
// allowed it to fire at the earliest and at the latest.
type simTimer struct {
	t        wheel.Timer
	armedAt  int64 // the instant the duration runs from
	callAt   int64 // the instant of the Reset call
	d        time.Duration
	pending  bool
	fires    int
	lateness []int64
}

// simCase describes a simulation: the driver wakes when it asked to, except
// that with probability lateProb it wakes up to maxLate late (a descheduled
// goroutine). catchUp says whether, and how, the resetters call CatchUp after
// each of their events.
type simCase struct {
	seed     uint64
	lateProb float64
	maxLate  time.Duration
	catchUp  catchUpMode
}

type catchUpMode int

const (
	catchUpNever catchUpMode = iota
	catchUpAlways
	// catchUpSplit calls CatchUp after every event, and half of the time
	// runs the driver (once or more) between its clock swap and its record.
	catchUpSplit
)

// simResult is what a simulation observed.
type simResult struct {
	lateness     []int64
	catchUps     int           // CatchUp calls that published a tick
	maxGap       time.Duration // longest time without a CatchUp call
	maxHoldBack  time.Duration // longest hold-back the wheel recorded
	finishedLate int           // split CatchUps the driver ran into
}

// simulate drives a real-clock wheel on a simulated clock. Resets happen at
// arbitrary instants, and resetters keep reading whatever tick was last
// published while the driver is late.
func simulate(t *testing.T, sc simCase) simResult {
	const tick = time.Millisecond
	rng := rand.New(rand.NewPCG(sc.seed, 11))
	var res simResult
	var now int64
	w := wheel.NewSimulated(func() int64 { return now }, wheel.WithTick(tick))
	defer w.Stop()

	timers := make([]simTimer, 64)
	for i := range timers {
		st := &timers[i]
		st.t.Init(w, func() {
			require.True(t, st.pending, "timer %d fired while not armed", i)
			min := st.armedAt + int64(max(st.d, 0))
			require.GreaterOrEqual(t, now, min, "timer %d armed at %v for %v fired early at %v",
				i, time.Duration(st.armedAt), st.d, time.Duration(now))
			st.pending = false
			st.fires++
			st.lateness = append(st.lateness, now-max(st.armedAt+int64(max(st.d, 0)), st.callAt))
		})
	}
	durations := []time.Duration{0, time.Millisecond, 1500 * time.Microsecond, 5 * time.Millisecond,
		64 * time.Millisecond, 70 * time.Millisecond, 300 * time.Millisecond, 5 * time.Second}

	wakeAt := w.Step()
	driverAt := wakeAt // when the simulated driver will actually run
	stamp, stampAt := time.Duration(0), int64(-1)
	var finish func() // the second half of a split CatchUp, if one is open
	var lastCatchUp int64
	for range 20000 {
		// The next thing to happen: a reset/stop after a random gap, or the driver.
		gap := int64(rng.ExpFloat64() * float64(300*time.Microsecond))
		if driverAt <= now+gap {
			now = max(now, driverAt)
			wakeAt = w.Step()
			driverAt = wakeAt
			if driverAt != math.MaxInt64 && rng.Float64() < sc.lateProb {
				driverAt += rng.Int64N(int64(sc.maxLate))
			}
			if finish != nil && rng.IntN(2) == 0 {
				finish()
				finish = nil
			} else if finish != nil {
				res.finishedLate++
			}
			continue
		}
		now += gap
		st := &timers[rng.IntN(len(timers))]
		if rng.IntN(8) == 0 {
			stopped := st.t.Stop()
			require.Equal(t, st.pending, stopped)
			st.pending = false
		} else if rng.IntN(4) == 0 {
			// An event loop read the exact clock at some instant not after
			// now and arms from it; the coarse clock plays no part.
			from := max(now-rng.Int64N(int64(3*time.Millisecond)), 1)
			d := durations[rng.IntN(len(durations))]
			was := st.t.ResetFrom(time.Duration(from), d)
			require.Equal(t, st.pending, was)
			st.pending, st.armedAt, st.callAt, st.d = true, from, now, d
		} else if rng.IntN(3) == 0 && stampAt >= 0 {
			// A policy stamped an event with Now earlier and arms from it.
			d := durations[rng.IntN(len(durations))]
			was := st.t.ResetFrom(stamp, d)
			require.Equal(t, st.pending, was)
			st.pending, st.armedAt, st.callAt, st.d = true, stampAt, now, d
		} else {
			d := durations[rng.IntN(len(durations))]
			was := st.t.Reset(d)
			require.Equal(t, st.pending, was)
			st.pending, st.armedAt, st.callAt, st.d = true, now, now, d
		}
		if rng.IntN(16) == 0 {
			stamp, stampAt = w.Now(), now
		}
		if sc.catchUp != catchUpNever && finish == nil {
			res.maxGap = max(res.maxGap, time.Duration(now-lastCatchUp))
			lastCatchUp = now
			if sc.catchUp == catchUpSplit && rng.IntN(2) == 0 {
				var ok bool
				if finish, ok = w.CatchUpSplit(); ok {
					res.catchUps++
				}
			} else if w.CatchUp() {
				res.catchUps++
			}
		}
		// A push or a stale clock wakes the driver at once (if it is not
		// descheduled); waking it early never hurts.
		if w.Stale() || rng.IntN(4) == 0 {
			driverAt = min(driverAt, now)
		}
	}
	if finish != nil {
		finish()
	}
	res.maxHoldBack = w.MaxHiccup()
	// Let everything fire, on time.
	for range 100000 {
		if w.Len() == 0 {
			break
		}
		now = max(now, wakeAt)
		if wakeAt == math.MaxInt64 {
			now += int64(tick)
		}
		wakeAt = w.Step()
	}
	require.Zero(t, w.Len())
	for i := range timers {
		require.False(t, timers[i].pending, "timer %d never fired", i)
		res.lateness = append(res.lateness, timers[i].lateness...)
	}
	return res
}

// newSim returns a simulated 1 ms wheel that reads the time from *now, and
// stops it when the test ends.
func newSim(tb testing.TB, now *int64) *wheel.Wheel {
	w := wheel.NewSimulated(func() int64 { return *now }, wheel.WithTick(time.Millisecond))
	tb.Cleanup(w.Stop)
	return w
}

// TestSimulated_NeverEarly checks the promise that survives a late driver: a
// timer never fires before its duration, however stale the tick it read.
func TestSimulated_NeverEarly(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode catchUpMode
	}{{"none", catchUpNever}, {"always", catchUpAlways}, {"split", catchUpSplit}} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("catchup=%s/seed=%d", mode.name, seed), func(t *testing.T) {
				res := simulate(t, simCase{seed: seed, lateProb: 0.2, maxLate: 20 * time.Millisecond, catchUp: mode.mode})
				if mode.mode != catchUpNever {
					require.NotZero(t, res.catchUps, "the late driver must leave ticks to catch up")
				}
				if mode.mode == catchUpSplit {
					require.NotZero(t, res.finishedLate, "the driver must run into half-done CatchUps")
				}
			})
		}
	}
}

// TestSimulated_CatchUpBoundsHoldBack checks what CatchUp is for: with a
// driver up to 20 ms late, resetters that call CatchUp keep every hold-back
// within the longest time they went without calling it, where without it
// the hold-backs grow to the driver's lateness.
func TestSimulated_CatchUpBoundsHoldBack(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			with := simulate(t, simCase{seed: seed, lateProb: 0.2, maxLate: 20 * time.Millisecond, catchUp: catchUpAlways})
			without := simulate(t, simCase{seed: seed, lateProb: 0.2, maxLate: 20 * time.Millisecond})
			require.NotZero(t, with.catchUps)
			assert.LessOrEqual(t, with.maxHoldBack, with.maxGap)
			assert.Greater(t, without.maxHoldBack, 5*time.Millisecond, "the case must be one where the driver runs late")
		})
	}
}

// TestSimulated_OnTimeLateness checks the other bound when the driver wakes
// when it asked to: at most the duration rounded up to the tick, plus one
// tick, plus the quarter-tick slack.
func TestSimulated_OnTimeLateness(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			late := simulate(t, simCase{seed: seed, maxLate: 1}).lateness
			require.NotEmpty(t, late)
			for _, l := range late {
				// the durations used are whole ms except 1.5ms, which rounds up by 0.5ms
				assert.LessOrEqual(t, l, int64(time.Millisecond+500*time.Microsecond+time.Millisecond/4))
			}
		})
	}
}

// TestSimulated_StaleClockAfterSleep arms a timer long after the wheel went to
// sleep: the tick it published last is ancient, and the timer must still wait
// its full duration.
func TestSimulated_StaleClockAfterSleep(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	var at int64 = -1
	tm := w.AfterFunc(time.Hour, func() {})
	tm.Stop()
	// Let the wheel decide it is idle.
	for now < int64(3*time.Second) {
		next := w.Step()
		if next == math.MaxInt64 {
			break
		}
		now = next
	}
	require.True(t, w.Stale(), "an idle wheel must stop keeping its clock fresh")
	before := w.Wakeups()
	now = int64(time.Hour) + 123456
	w.AfterFunc(10*time.Millisecond, func() { at = now })
	require.False(t, w.Stale(), "the first Reset after a sleep publishes the real tick")
	for at < 0 {
		next := w.Step()
		require.NotEqual(t, int64(math.MaxInt64), next)
		now = next
	}
	assert.GreaterOrEqual(t, at, int64(time.Hour)+123456+int64(10*time.Millisecond))
	assert.LessOrEqual(t, at, int64(time.Hour)+123456+int64(10*time.Millisecond)+int64(time.Millisecond+time.Millisecond/4))
	assert.Equal(t, before, w.Wakeups(), "simulated steps are not counted as goroutine wake-ups")
}

// TestSimulated_HiccupRecorded checks the bookkeeping behind NeverEarly: a
// driver that wakes late records the late tick, and forgets it eventually.
func TestSimulated_HiccupRecorded(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	w.AfterFunc(time.Hour, func() {})
	w.Step()
	require.Zero(t, w.Hiccups())
	now = int64(7*time.Millisecond) + 1 // six ticks late
	w.Step()
	require.Equal(t, 1, w.Hiccups())
}

// TestSimulated_ExactNotHeldBack checks that a timer armed from an exact
// instant is not held back by a hiccup of the tick that instant lies in,
// while one armed from the coarse clock meanwhile is.
func TestSimulated_ExactNotHeldBack(t *testing.T) {
	const ms = int64(time.Millisecond)
	var now int64
	w := newSim(t, &now)
	w.Step() // tick 0 on the clock
	var coarseAt, exactAt int64
	coarse := w.AfterFunc(time.Hour, func() { coarseAt = now })
	exact := w.AfterFunc(time.Hour, func() { exactAt = now })
	// The driver is late: tick 0 is still on the clock at 6.5 ms. The
	// coarse timer reads it (due at tick 3, held back); the exact one is
	// armed for 0.5 ms + 2 ms (due at tick 3 too).
	now = 6*ms + ms/2
	coarse.Reset(2 * time.Millisecond)
	exact.ResetFrom(time.Duration(ms/2), 2*time.Millisecond)
	w.Step()
	assert.Equal(t, 6*ms+ms/2, exactAt, "the exact timer fires at the first step after tick 3")
	assert.Zero(t, coarseAt, "the coarse one is held back by how long tick 0 stayed")
	require.Greater(t, w.MaxHiccup(), 5*time.Millisecond)
	for coarseAt == 0 && now < 20*ms {
		now += ms / 4
		w.Step()
	}
	assert.Equal(t, 8*ms+ms/2, coarseAt, "armed at 6.5 ms for 2 ms, and no earlier")
}

// TestSimulated_ExactFiresAtItsTick checks that a timer armed from an exact
// instant fires at the first tick at or after its deadline, where one armed
// from the coarse clock waits a quarter tick more (a reader of tick T only
// knows that the time is below T+1 plus that slack), and that the driver
// sleeps until exactly then.
func TestSimulated_ExactFiresAtItsTick(t *testing.T) {
	const ms = int64(time.Millisecond)
	now := 2 * int64(time.Second) // past the first second's activity
	w := newSim(t, &now)
	w.Step()
	var exactAt, exact2At, coarseAt int64
	var exact, exact2 wheel.Timer
	exact.Init(w, func() { exactAt = now })
	exact2.Init(w, func() { exact2At = now })
	exact.ResetFrom(time.Duration(now+3*ms/10), 3*time.Millisecond) // 2003.3 ms: tick 2004
	// Nothing reads the clock: the driver sleeps until the exact timer's
	// tick (in two parts where it sleeps the last bit precisely).
	for exactAt == 0 && now < 2010*ms {
		if wake := w.Step(); exactAt == 0 {
			now = wake
		}
	}
	require.Equal(t, 2004*ms, exactAt, "an exact timer fires at its tick")
	require.True(t, w.Stale())

	// A coarse reader (the clock is stale: it reads 2004.3 ms, publishes
	// tick 2004 and makes the wheel keep its clock) and an exact timer.
	now += 3 * ms / 10
	w.AfterFunc(2*time.Millisecond, func() { coarseAt = now })  // tick 2004 read: tick 2007
	exact2.ResetFrom(time.Duration(now), 1700*time.Microsecond) // 2006.0 ms: tick 2006
	for coarseAt == 0 && now < 2010*ms {
		now = max(now, w.Step())
	}
	assert.Equal(t, 2006*ms, exact2At, "an exact timer fires at its tick")
	assert.Equal(t, 2007*ms+ms/4, coarseAt, "a coarse one a quarter tick after its tick")
}

// TestSimulated_ExactArmingsLetClockGoStale checks that timers armed from
// exact instants do not make the wheel keep its coarse clock (they read
// none), while a reader that finds the clock stale does.
func TestSimulated_ExactArmingsLetClockGoStale(t *testing.T) {
	const ms = int64(time.Millisecond)
	now := 2 * int64(time.Second) // past the first second's activity
	w := newSim(t, &now)
	require.Equal(t, int64(math.MaxInt64), w.Step(), "nothing pending, nothing read: sleep")
	require.True(t, w.Stale())

	timers := make([]wheel.Timer, 8)
	for i := range timers {
		timers[i].Init(w, func() {})
	}
	for step := range 5 {
		now += ms/3 + 1
		for i := range timers {
			from := now - int64(i)
			if from%ms == 0 {
				from-- // a multiple of the tick would be taken as a coarse stamp
			}
			timers[i].ResetFrom(time.Duration(from), time.Duration(10+step+i)*time.Minute)
			if step%2 == 1 {
				timers[i].Stop()
			}
		}
		require.True(t, w.Stale(), "step %d: an exact arming reads no clock and refreshes none", step)
		wakeAt := w.Step()
		require.True(t, w.Stale(), "step %d: exact armings and stops are no reason to keep the clock", step)
		require.Greater(t, wakeAt, now+int64(time.Minute), "step %d: sleep until the first timer", step)
	}

	now += ms / 3
	w.Now() // a coarse reader refreshes the stale clock
	require.False(t, w.Stale())
	assert.Equal(t, (now/ms+1)*ms, w.Step(), "a coarse reader: keep the clock, wake at the next tick")
	assert.False(t, w.Stale())
}

// TestSimulated_CatchUp steps through CatchUp's cases on a simulated clock:
// it publishes only an overdue tick, and the timers armed from the tick it
// replaced wait for its record, then are held back by exactly the time that
// tick stayed visible too long.
func TestSimulated_CatchUp(t *testing.T) {
	const ms = int64(time.Millisecond)
	var now int64
	w := newSim(t, &now)
	w.AfterFunc(time.Hour, func() {})
	w.Step() // publishes tick 0 and keeps the clock fresh

	now = ms - 1 // tick 0 is still current
	require.False(t, w.CatchUp())
	require.Equal(t, time.Duration(0), w.Now())
	w.Step() // the driver keeps the clock itself: tick 0 stays

	// The driver is late: tick 0 is still on the clock at 3.6 ms. A timer is
	// armed from it meanwhile (really at 3.6 ms, so due at 5.6 ms), and
	// CatchUp takes tick 0 off the clock at 3.7 ms.
	now = 3*ms + 600*int64(time.Microsecond)
	var firedAt int64 = -1
	w.AfterFunc(2*time.Millisecond, func() { firedAt = now })
	now += 100 * int64(time.Microsecond)
	finish, ok := w.CatchUpSplit()
	require.True(t, ok)
	require.Equal(t, 3*time.Millisecond, w.Now(), "CatchUp publishes the current tick")
	_, again := w.CatchUpSplit()
	require.False(t, again, "tick 3 is on time")

	// The timer's deadline is tick 3 (0 + 1 + 2), and 3.25 ms has passed:
	// without the record it would fire now, early. The record is not done,
	// so the driver holds it and asks to look again at the next tick.
	wakeAt := w.Step()
	require.Equal(t, int64(-1), firedAt, "fired before CatchUp recorded its tick")
	require.Equal(t, 4*ms, wakeAt)

	now = 4 * ms
	finish() // tick 0 was visible until 4 ms: 2.75 ms past 1.25 ms
	w.Step()
	require.Equal(t, 1, w.Hiccups())
	require.Equal(t, time.Duration(2750*time.Microsecond), w.MaxHiccup())
	for firedAt < 0 {
		next := w.Step()
		require.NotEqual(t, int64(math.MaxInt64), next)
		now = next
	}
	// Due at 3.25 ms on the ticks, plus 2.75 ms held back: 6 ms, after the
	// true deadline of 5.6 ms.
	assert.Equal(t, 6*ms, firedAt)

	// Nothing to catch up on a stopped wheel.
	now += 10 * ms
	w.Stop()
	assert.False(t, w.CatchUp())
}

// TestCatchUp_ManualAndStale checks the cases where CatchUp has nothing to
// do: a manual clock is exact, and a stale clock is read by the next Reset.
func TestCatchUp_ManualAndStale(t *testing.T) {
	c := wheel.NewManualClock()
	m := wheel.New(wheel.WithClock(c))
	defer m.Stop()
	c.Advance(time.Hour)
	assert.False(t, m.CatchUp())
	assert.Zero(t, m.Wakeups(), "a manual wheel has no goroutine to wake")

	var now int64
	w := newSim(t, &now)
	for now < int64(3*time.Second) { // let the wheel decide it is idle
		next := w.Step()
		if next == math.MaxInt64 {
			break
		}
		now = next
	}
	require.True(t, w.Stale())
	now += int64(time.Hour)
	assert.False(t, w.CatchUp())
	assert.True(t, w.Stale())
}

// TestSimulated_NapWhileCaughtUp checks that the wheel's goroutine wakes
// less often while resetters keep its clock with CatchUp, up to every
// eighth tick, that the hold-backs meanwhile stay within a tick, and that
// it goes back to every tick once they stop.
func TestSimulated_NapWhileCaughtUp(t *testing.T) {
	const tick = int64(time.Millisecond)
	var now int64
	w := newSim(t, &now)
	tm := w.AfterFunc(time.Hour, func() {})
	// run advances the clock to until in steps of gap, resetting the timer
	// (and calling CatchUp if catchUp) at each step and running the driver
	// when it asked to be woken; it returns how often the driver ran and
	// the longest sleep it asked for after the first from.
	wakeAt := w.Step()
	run := func(until, gap int64, catchUp bool, from int64) (steps int, longest int64) {
		for now < until {
			now = min(now+gap, wakeAt)
			tm.Stop() // inbox traffic: the wheel sees timers in use
			tm.Reset(time.Hour)
			if catchUp {
				w.CatchUp()
			}
			if now >= wakeAt {
				steps++
				wakeAt = w.Step()
				if now >= from {
					longest = max(longest, wakeAt-now)
				}
			}
		}
		return steps, longest
	}
	const gap = 100 * int64(time.Microsecond)
	without, _ := run(now+1000*tick, gap, false, 0)
	with, napped := run(now+1000*tick, gap, true, 0)
	assert.GreaterOrEqual(t, without, 1000, "without CatchUp the wheel keeps its clock at every tick")
	assert.LessOrEqual(t, with, 1000/8+8, "with CatchUp every 100µs it naps 8 ticks")
	t.Logf("without %d with %d napped %v", without, with, time.Duration(napped))
	assert.LessOrEqual(t, napped, 8*tick)
	assert.Greater(t, napped, 7*tick)
	assert.LessOrEqual(t, w.MaxHiccup(), time.Millisecond, "hold-backs stay within a tick while it naps")
	_, back := run(now+20*tick, gap, false, now+10*tick)
	assert.LessOrEqual(t, back, tick, "without CatchUp it wakes at every tick again")
}

// The driver sleeps the last stretch before a timer falls due precisely
// (in futex), and sleeps longer than that end early on the runtime's timer
// to take the rest precisely; sleeps that only keep the clock, or with
// nothing due, are never precise.
func TestSimulated_PreciseBeforeDue(t *testing.T) {
	if !wheel.HavePreciseSleep {
		t.Skip("no futex on this system: every sleep is on the runtime's timer")
	}
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // precise sleeps need a second P
	}
	const tick = int64(time.Millisecond)
	var now int64
	w := newSim(t, &now)
	// step runs the driver at its wake-up time until it asks for a sleep
	// that does not only keep the clock (the wheel has gone idle).
	step := func() int64 {
		for {
			wakeAt := w.Step()
			if w.Stale() {
				return wakeAt
			}
			assert.False(t, w.PreciseSleep(), "a sleep that keeps the clock is not precise")
			now = wakeAt
		}
	}
	require.Equal(t, int64(math.MaxInt64), step(), "nothing pending: sleep until woken")
	assert.False(t, w.PreciseSleep())

	armedAt := now
	fired := int64(-1)
	w.AfterFunc(5*time.Second, func() { fired = now }) // past the second the clock is kept
	wakeAt := step()
	wakeups, precise := 0, 0
	for fired < 0 && wakeups < 20 {
		wakeups++
		if !w.PreciseSleep() {
			// A sleep on the runtime's timer, towards the timer or a slot
			// it moves down from: it ends up to a millisecond late.
			now = wakeAt + 700*int64(time.Microsecond)
		} else {
			precise++
			assert.LessOrEqual(t, wakeAt-now, int64(wheel.PreciseLead), "a precise sleep lasts at most PreciseLead")
			now = wakeAt
		}
		wakeAt = w.Step()
	}
	require.GreaterOrEqual(t, fired, armedAt+5000*tick, "fired, and not early")
	assert.Less(t, fired, armedAt+5000*tick+2*tick, "within the tick the deadline rounds up to, and the slack")
	assert.Positive(t, precise, "the last stretch was slept precisely")
	assert.Less(t, wakeups, 10, "the idle wheel woke only around the timer's slots")

	// With a single P a futex sleep would hold it: never precise.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w.AfterFunc(time.Millisecond, func() {})
	for range 20 {
		now = w.Step()
		assert.False(t, w.PreciseSleep(), "precise with GOMAXPROCS 1")
	}
}
