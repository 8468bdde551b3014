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
	lateness []int64
}

// simulate drives a real-clock wheel on a simulated clock. Resets happen at
// arbitrary instants, also while the driver is late.
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
		// Past level 0 and level 1 of the wheel, filed again on the way.
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
			// An event loop read the clock at some instant not after now
			// and arms from it.
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
		// A push wakes the driver at once (if it is not descheduled);
		// waking it early never hurts.
		if w.WakeRequested() || rng.IntN(4) == 0 {
			driverAt = min(driverAt, now)
		}
	}
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
// timer never fires before its duration, however late the driver runs.
func TestSimulated_NeverEarly(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			res := simulate(t, simCase{seed: seed, lateProb: 0.2, maxLate: 20 * time.Millisecond, long: seed%2 == 1})
			require.NotEmpty(t, res.lateness)
		})
	}
}

// TestSimulated_OnTimeLateness checks the other bound when the driver wakes
// when it asked to: the deadline rounded up to the tick, so less than a
// tick late (a past deadline: the next tick after the call).
func TestSimulated_OnTimeLateness(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			late := simulate(t, simCase{seed: seed, maxLate: 1}).lateness
			require.NotEmpty(t, late)
			for _, l := range late {
				assert.LessOrEqual(t, l, int64(time.Millisecond))
			}
		})
	}
}

// TestSimulated_ArmAfterLongSleep arms a timer long after the wheel went to
// sleep: the driver's last tick is ancient, and the timer must still wait
// its full duration, and fire at its tick.
func TestSimulated_ArmAfterLongSleep(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	var at int64 = -1
	tm := w.AfterFunc(2*time.Hour, func() { at = now })
	// Let the wheel decide it is idle.
	for now < int64(3*time.Second) {
		now = min(w.Step(), int64(3*time.Second))
	}
	before := w.Wakeups()
	now = int64(time.Hour) + 123456
	tm.Reset(10 * time.Millisecond)
	require.True(t, w.WakeRequested(), "an arming before the driver's planned wake-up")
	for at < 0 {
		next := w.Step()
		if at < 0 {
			require.NotEqual(t, int64(math.MaxInt64), next, "a pending timer, and the driver plans no wake-up")
		}
		now = next
	}
	assert.GreaterOrEqual(t, at, int64(time.Hour)+123456+int64(10*time.Millisecond))
	assert.LessOrEqual(t, at, int64(time.Hour)+123456+int64(10*time.Millisecond)+int64(time.Millisecond))
	assert.Equal(t, before, w.Wakeups(), "simulated steps are not counted as goroutine wake-ups")
}

// TestSimulated_LateDriver checks that timers armed while the driver runs
// late fire at the first step at or after their tick, none early: one
// armed with Reset reads the clock, one armed from an instant before the
// driver's last tick fires in the step that finds it due.
func TestSimulated_LateDriver(t *testing.T) {
	const ms = int64(time.Millisecond)
	var now int64
	w := newSim(t, &now)
	w.Step() // tick 0 on the clock
	var resetAt, fromAt int64
	reset := w.AfterFunc(time.Hour, func() { resetAt = now })
	from := w.AfterFunc(time.Hour, func() { fromAt = now })
	// The driver is late: it last ran at 0, and it is 6.5 ms. Reset reads
	// the clock (due at 8.5 ms: tick 9); the other is armed for 0.5 ms + 2
	// ms (due at tick 3, already past).
	now = 6*ms + ms/2
	reset.Reset(2 * time.Millisecond)
	from.ResetFrom(time.Duration(ms/2), 2*time.Millisecond)
	w.Step()
	assert.Equal(t, 6*ms+ms/2, fromAt, "the past deadline fires at the first step after tick 3")
	assert.Zero(t, resetAt)
	for resetAt == 0 && now < 20*ms {
		now += ms / 4
		w.Step()
	}
	assert.Equal(t, 9*ms, resetAt, "armed at 6.5 ms for 2 ms: at tick 9, and no earlier")
}

// TestSimulated_ExactFiresAtItsTick checks that a timer fires at the first
// tick at or after its deadline, whether armed with Reset or ResetFrom, and
// that the driver sleeps until exactly then.
func TestSimulated_ExactFiresAtItsTick(t *testing.T) {
	const ms = int64(time.Millisecond)
	now := 2 * int64(time.Second) // past the first second's activity
	w := newSim(t, &now)
	w.Step()
	var exactAt, exact2At, resetAt int64
	var exact, exact2 wheel.Timer
	exact.Init(w, func() { exactAt = now })
	exact2.Init(w, func() { exact2At = now })
	exact.ResetFrom(time.Duration(now+3*ms/10), 3*time.Millisecond) // 2003.3 ms: tick 2004
	// The driver sleeps until the timer's tick (in two parts where it
	// sleeps the last bit precisely).
	for exactAt == 0 && now < 2010*ms {
		if wake := w.Step(); exactAt == 0 {
			now = wake
		}
	}
	require.Equal(t, 2004*ms, exactAt, "a timer fires at its tick")

	// A pending timer moved earlier with Reset, and one armed from Now.
	reset := w.AfterFunc(time.Hour, func() { resetAt = now })
	now += 3 * ms / 10
	require.Equal(t, time.Duration(now), w.Now(), "Now is exact")
	reset.Reset(2 * time.Millisecond)                // 2006.3 ms: tick 2007
	exact2.ResetFrom(w.Now(), 1700*time.Microsecond) // 2006.0 ms: tick 2006
	for resetAt == 0 && now < 2010*ms {
		now = max(now, w.Step())
	}
	assert.Equal(t, 2006*ms, exact2At, "a timer armed from Now fires at its tick")
	assert.Equal(t, 2007*ms, resetAt, "a timer armed with Reset fires at its tick")
}

// TestSimulated_ArmingsDoNotWakeDriver checks that armings later than the
// driver's next timer wake it only to be counted within ReleaseDelay, and
// that moving pending timers later, with Reset or ResetFrom, and reading
// the clock never wake it: it sleeps until its first timer.
func TestSimulated_ArmingsDoNotWakeDriver(t *testing.T) {
	const ms = int64(time.Millisecond)
	now := 2 * int64(time.Second)
	w := newSim(t, &now)
	require.Equal(t, int64(math.MaxInt64), w.Step(), "nothing pending: sleep")
	first := w.AfterFunc(5*time.Minute, func() {})
	defer first.Stop()
	w.Step()
	now += int64(wheel.ReleaseDelay)
	require.Greater(t, w.Step(), now+int64(time.Minute), "sleep until the first timer")

	timers := make([]wheel.Timer, 8)
	arm := func(step int) {
		for i := range timers {
			if i%2 == 0 {
				timers[i].ResetFrom(w.Now()-time.Duration(i), time.Duration(10+step+i)*time.Minute)
			} else {
				timers[i].Reset(time.Duration(10+step+i) * time.Minute)
			}
		}
	}
	for i := range timers {
		timers[i].Init(w, func() { t.Error("fired") })
	}
	arm(0)
	require.True(t, w.WakeRequested(), "new armings during a long sleep: counted within ReleaseDelay")
	wakeAt := w.Step()
	require.Equal(t, now+int64(wheel.ReleaseDelay), wakeAt, "took in armings: back within ReleaseDelay")
	assert.Equal(t, 9, w.Len())
	for step := 1; step <= 4; step++ {
		now += int64(wheel.ReleaseDelay) / 5
		arm(step)
		w.Now()
		require.False(t, w.WakeRequested(), "step %d: later deadlines, or a clock read, woke the driver", step)
	}
	now = wakeAt
	wakeAt = w.Step()
	require.Greater(t, wakeAt, now+int64(time.Minute), "nothing taken in: sleep until the first timer")
	for step := 5; step <= 8; step++ {
		now += int64(wheel.ReleaseDelay)
		arm(step)
		w.Now()
		require.False(t, w.WakeRequested(), "step %d: later deadlines, or a clock read, woke a long sleep", step)
	}
	timers[3].Stop()
	assert.True(t, w.WakeRequested(), "a stop during a long sleep: released within ReleaseDelay")
	for i := range timers {
		timers[i].Stop()
	}
}

// The driver sleeps the last stretch before a timer falls due precisely
// (in futex), and sleeps longer than that end early on the runtime's timer
// to take the rest precisely; a sleep with nothing due is never precise.
func TestSimulated_PreciseBeforeDue(t *testing.T) {
	if !wheel.HavePreciseSleep {
		t.Skip("no futex on this system: every sleep is on the runtime's timer")
	}
	const tick = int64(time.Millisecond)
	var now int64
	w := newSim(t, &now)
	w.SetCanPrecise(true)
	wakeAt, precise := w.StepPlan()
	require.Equal(t, int64(math.MaxInt64), wakeAt, "nothing pending: sleep until woken")
	assert.False(t, precise)

	armedAt := now
	fired := int64(-1)
	w.AfterFunc(5*time.Second, func() { fired = now })
	wakeAt, precise = w.StepPlan()
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
