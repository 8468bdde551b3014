package wheel_test

import (
	"fmt"
	"math"
	"math/rand/v2"
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
// goroutine).
type simCase struct {
	seed     uint64
	lateProb float64
	maxLate  time.Duration
	long     bool // arm long timers too
}

// simResult is what a simulation observed.
type simResult struct {
	lateness    []int64
	maxHoldBack time.Duration // longest hold-back the wheel recorded
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
	if sc.long {
		// Past the 2^13 ticks an age code holds exactly, and past the
		// 2^18 the previous wheel's base bits did.
		durations = append(durations, 10*time.Second, 5*time.Minute, time.Hour)
	}

	wakeAt := w.Step()
	driverAt := wakeAt // when the simulated driver will actually run
	stamp, stampAt := time.Duration(0), int64(-1)
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
		// A push or a stale clock wakes the driver at once (if it is not
		// descheduled); waking it early never hurts.
		if w.Stale() || rng.IntN(4) == 0 {
			driverAt = min(driverAt, now)
		}
	}
	res.maxHoldBack = w.MaxHoldBack()
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
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			res := simulate(t, simCase{seed: seed, lateProb: 0.2, maxLate: 20 * time.Millisecond, long: seed%2 == 1})
			require.Greater(t, res.maxHoldBack, 5*time.Millisecond, "the driver must run late enough to hold timers back")
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
	tm := w.AfterFunc(2*time.Hour, func() { at = now })
	// Let the wheel decide it is idle.
	for now < int64(3*time.Second) {
		now = w.Step()
	}
	require.True(t, w.Stale(), "an idle wheel must stop keeping its clock fresh")
	before := w.Wakeups()
	now = int64(time.Hour) + 123456
	tm.Reset(10 * time.Millisecond) // a coarse reader: the clock is stale
	require.False(t, w.Stale(), "the first coarse reader after a sleep publishes the real tick")
	for at < 0 {
		next := w.Step()
		require.NotEqual(t, int64(math.MaxInt64), next)
		now = next
	}
	assert.GreaterOrEqual(t, at, int64(time.Hour)+123456+int64(10*time.Millisecond))
	assert.LessOrEqual(t, at, int64(time.Hour)+123456+int64(10*time.Millisecond)+int64(time.Millisecond+time.Millisecond/4))
	assert.Equal(t, before, w.Wakeups(), "simulated steps are not counted as goroutine wake-ups")
}

// TestSimulated_HoldBackRecorded checks the bookkeeping behind NeverEarly: a
// driver that wakes late notes how long the late tick stayed on the clock.
func TestSimulated_HoldBackRecorded(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	w.AfterFunc(time.Hour, func() {})
	w.Step()
	require.Zero(t, w.MaxHoldBack())
	now = int64(7*time.Millisecond) + 1 // tick 0 stayed until 7 ms: 5.75 ms past its end and slack
	w.Step()
	require.Equal(t, 5750*time.Microsecond+1, w.MaxHoldBack())
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
	require.Greater(t, w.MaxHoldBack(), 5*time.Millisecond)
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

	// A coarse reader (the clock is stale: Now reads 2004.3 ms, publishes
	// tick 2004 and makes the wheel keep its clock), a pending timer moved
	// earlier from that tick, and an exact timer.
	coarse := w.AfterFunc(time.Hour, func() { coarseAt = now })
	now += 3 * ms / 10
	require.Equal(t, time.Duration(2004*ms), w.Now())
	coarse.Reset(2 * time.Millisecond)                          // tick 2004 read: tick 2007
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
		now += int64(wheel.TakeEvery) + ms/3 + 1 // the driver takes the inbox in
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
		if step%2 == 1 {
			require.Equal(t, now+int64(wheel.ReleaseDelay), wakeAt, "step %d: took in stops: back within ReleaseDelay for more", step)
		} else {
			require.Greater(t, wakeAt, now+int64(time.Minute), "step %d: no stops: sleep until the first timer", step)
		}
	}

	now += ms / 3
	w.Now() // a coarse reader refreshes the stale clock
	require.False(t, w.Stale())
	assert.Equal(t, (now/ms+1)*ms, w.Step(), "a coarse reader: keep the clock, wake at the next tick")
	assert.False(t, w.Stale())
}

// The driver sleeps the last stretch before a timer falls due precisely
// (in futex), and sleeps longer than that end early on the runtime's timer
// to take the rest precisely; sleeps that only keep the clock, or with
// nothing due, are never precise.
func TestSimulated_PreciseBeforeDue(t *testing.T) {
	if !wheel.HavePreciseSleep {
		t.Skip("no futex on this system: every sleep is on the runtime's timer")
	}
	const tick = int64(time.Millisecond)
	var now int64
	w := newSim(t, &now)
	w.SetCanPrecise(true)
	// step runs the driver at its wake-up time until it asks for a sleep
	// that does not only keep the clock (the wheel has gone idle).
	step := func() (int64, bool) {
		for {
			wakeAt, precise := w.StepPlan()
			if w.Stale() {
				return wakeAt, precise
			}
			assert.False(t, precise, "a sleep that keeps the clock is not precise")
			now = wakeAt
		}
	}
	wakeAt, precise := step()
	require.Equal(t, int64(math.MaxInt64), wakeAt, "nothing pending: sleep until woken")
	assert.False(t, precise)

	armedAt := now
	fired := int64(-1)
	w.AfterFunc(5*time.Second, func() { fired = now }) // past the second the clock is kept
	wakeAt, precise = step()
	wakeups, precises := 0, 0
	for fired < 0 && wakeups < 20 {
		wakeups++
		if !precise {
			// A sleep on the runtime's timer, towards the timer or a slot
			// it moves down from: it ends up to a millisecond late.
			now = wakeAt + 700*int64(time.Microsecond)
		} else {
			precises++
			assert.LessOrEqual(t, wakeAt-now, int64(wheel.PreciseLead), "a precise sleep lasts at most PreciseLead")
			now = wakeAt
		}
		wakeAt, precise = w.StepPlan()
	}
	require.GreaterOrEqual(t, fired, armedAt+5000*tick, "fired, and not early")
	assert.Less(t, fired, armedAt+5000*tick+2*tick, "within the tick the deadline rounds up to")
	assert.Positive(t, precises, "the last stretch was slept precisely")
	assert.Less(t, wakeups, 15, "the idle wheel woke only around the timer's slots and once a second")

	// Where a futex sleep would hold the only P, never precise.
	w.SetCanPrecise(false)
	w.AfterFunc(time.Millisecond, func() {})
	for range 20 {
		now, precise = w.StepPlan()
		assert.False(t, precise, "precise without a P to spare")
	}
}
