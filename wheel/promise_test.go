package wheel_test

// Simulated-driver tests of the wheel's promises that depend on how late its
// goroutine runs: never early for any duration, a past deadline on the next
// tick, stopped timers released within ReleaseDelay. They use only the
// simulated driver (NewSimulated, Step) and the public API.

import (
	"math"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/wheel"
)

const ms = int64(time.Millisecond)

// runUntil steps a simulated driver at the times it asks to wake (at least
// every second, as a driver holding timers does) until done reports true,
// and fails if that takes more than limit steps.
func runUntil(t *testing.T, w *wheel.Wheel, now *int64, limit int, done func() bool) {
	t.Helper()
	for range limit {
		wake := w.Step()
		if done() {
			return
		}
		*now = max(*now+1, min(wake, *now+int64(time.Second)))
	}
	t.Fatalf("not done after %d steps, at %v", limit, time.Duration(*now))
}

// TestSimulated_NeverEarlyLongTimers arms 5-minute, 1-hour and MaxDuration
// timers while the driver is 20 ms late (tick 0 still on the coarse clock at
// 20 ms), in each way a timer can be armed, lets the driver catch up, and
// then jumps to just before each deadline: none may fire before its duration
// has passed since the call (or, for a stamp, since the Now call that
// returned it).
func TestSimulated_NeverEarlyLongTimers(t *testing.T) {
	const lateAt = 20 * ms // the driver's first wake-up after tick 0
	cases := []struct {
		name string
		// arm arms tm (pre-armed at 0 with pre, if pre > 0) for d at
		// lateAt, or later for old stamps, and returns the instant the
		// duration runs from.
		pre time.Duration
		arm func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64
	}{
		{name: "coarse later (lazy)", pre: time.Millisecond,
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				require.True(t, tm.Reset(d))
				return *now
			}},
		{name: "coarse earlier (pushed)", pre: 100 * 365 * 24 * time.Hour,
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				require.True(t, tm.Reset(d))
				return *now
			}},
		{name: "stamp", pre: time.Millisecond,
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				stamp := w.Now()
				require.Zero(t, stamp, "tick 0 is still on the clock")
				tm.ResetFrom(stamp, d)
				return *now
			}},
		{name: "old stamp",
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				stamp, at := w.Now(), *now
				require.Zero(t, stamp, "tick 0 is still on the clock")
				// The driver catches up, keeps the clock for a second,
				// sleeps until half the duration has passed; then the
				// stamp is used.
				for wake := w.Step(); !w.Stale(); wake = w.Step() {
					*now = wake
				}
				*now = at + int64(d)/2
				w.Step()
				require.False(t, tm.ResetFrom(stamp, d))
				return at
			}},
		{name: "exact", pre: time.Millisecond,
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				tm.ResetFrom(time.Duration(*now+1), d)
				return *now + 1
			}},
	}
	for _, tc := range cases {
		for _, d := range []time.Duration{5 * time.Minute, time.Hour, -1} {
			name := d.String()
			if d < 0 {
				name = "MaxDuration"
			}
			t.Run(tc.name+"/d="+name, func(t *testing.T) {
				var now int64
				w := newSim(t, &now)
				if d < 0 {
					d = w.MaxDuration()
				}
				fired := int64(-1)
				var tm wheel.Timer
				tm.Init(w, func() { fired = now })
				if tc.pre > 0 {
					tm.Reset(tc.pre)
				}
				w.Step() // tick 0 on the clock
				now = lateAt
				ref := tc.arm(w, &tm, &now, d)
				due := ref + int64(d)
				// The driver catches up, keeps the clock for a second, and
				// sleeps (or is late) until just before the deadline.
				for wake := w.Step(); !w.Stale() && fired < 0; wake = w.Step() {
					now = wake
				}
				if due-100*ms > now {
					now = due - 100*ms
				}
				runUntil(t, w, &now, 10000, func() bool { return fired >= 0 || now > due+2*int64(time.Second) })
				if fired < 0 {
					// MaxDuration after a time past the start may lie
					// beyond the clock's end: clamped there, it never fires.
					require.Greater(t, due, int64(w.MaxDuration())+ms, "never fired")
					return
				}
				require.GreaterOrEqual(t, fired, due, "fired %v early", time.Duration(due-fired))
				assert.LessOrEqual(t, fired, due+2*ms, "fired %v late", time.Duration(fired-due))
			})
		}
	}
}

// TestSimulated_PastDeadlineNextTick checks that a deadline already past
// when the timer is armed fires at the next tick, not in the driver's
// current pass, as on the manual clock; so a callback that re-arms itself
// for the past fires once per tick and never keeps the driver from sleeping.
func TestSimulated_PastDeadlineNextTick(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rearm func(w *wheel.Wheel, tm *wheel.Timer, now int64)
		late  int64 // after the tick: a quarter tick for a coarse deadline
	}{
		{name: "exact instant", late: 0, rearm: func(w *wheel.Wheel, tm *wheel.Timer, now int64) {
			tm.ResetFrom(time.Duration(now-3*ms+1), 0)
		}},
		{name: "old stamp", late: ms / 4, rearm: func(w *wheel.Wheel, tm *wheel.Timer, now int64) {
			tm.ResetFrom(time.Duration(ms), time.Millisecond)
		}},
		{name: "negative duration", late: ms / 4, rearm: func(w *wheel.Wheel, tm *wheel.Timer, now int64) {
			tm.Reset(-1500 * time.Microsecond) // between -2 and -1 ticks: see cachedFor
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := 5*ms + ms/3
			w := newSim(t, &now)
			w.Step()
			var fires []int64
			var tm wheel.Timer
			tm.Init(w, func() {
				fires = append(fires, now)
				tc.rearm(w, &tm, now)
			})
			tc.rearm(w, &tm, now)
			for now < 15*ms {
				wake := w.Step()
				require.Greater(t, wake, now, "the driver sleeps: a past deadline waits for the next tick")
				now = wake
			}
			require.Len(t, fires, 9)
			for i, at := range fires {
				assert.Equal(t, (6+int64(i))*ms+tc.late, at, "firing %d: one per tick, from the tick after the arming", i)
			}
		})
	}
}

// TestSimulated_StoppedReleased runs connection churn on a wheel armed only
// from exact instants (as netserver's is), whose driver, reading no coarse
// clock, sleeps as long as it may: 2 000 connections a second open, arm a
// 1-hour timer and close, beside 100 long-lived ones. A closed connection's
// memory must be released within ReleaseDelay, not held until the driver
// next has a timer to fire: the live connections stay flat. The simulated
// driver steps when it planned to and whenever a Stop asks to wake it, as
// the real one would; it must wake about once per ReleaseDelay, not per
// stop, and sleep until its next timer once the churn ends.
func TestSimulated_StoppedReleased(t *testing.T) {
	type conn struct {
		idle wheel.Timer
		buf  [64]byte
	}
	now := 2 * int64(time.Second)
	w := newSim(t, &now)
	open := make([]*conn, 100)
	for i := range open {
		c := &conn{}
		c.idle.Init(w, func() { c.buf[0]++ })
		c.idle.ResetFrom(time.Duration(now+1), time.Hour)
		open[i] = c
	}
	wakeAt := w.Step()
	var closed []weak.Pointer[conn]
	live := func() int {
		runtime.GC()
		n := 0
		for _, p := range closed {
			if p.Value() != nil {
				n++
			}
		}
		return n
	}
	require.Greater(t, wakeAt, now+int64(wheel.ReleaseDelay), "nothing stopped yet: sleep until the first timer")
	const perMs = 2
	var samples []int
	steps := 0
	for i := 1; i <= 30_000; i++ {
		now += ms
		for range perMs {
			c := &conn{}
			c.idle.Init(w, func() { c.buf[0]++ })
			c.idle.ResetFrom(time.Duration(now-1), time.Hour)
			c.idle.Stop()
			closed = append(closed, weak.Make(c))
		}
		if now >= wakeAt || w.WakeRequested() {
			wakeAt = w.Step()
			steps++
		}
		if i%10_000 == 0 {
			samples = append(samples, live())
		}
	}
	bound := perMs * int(wheel.ReleaseDelay/time.Millisecond+10)
	t.Logf("closed connections still referenced at 10, 20, 30 s: %v (bound %d); %d wake-ups in 30 s", samples, bound, steps)
	for i, n := range samples {
		assert.LessOrEqual(t, n, bound, "at %d s", 10*(i+1))
	}
	assert.LessOrEqual(t, steps, 32, "the stops woke the driver more than once a second")

	// The churn ends: one more wake-up takes in the last stops, and then the
	// driver sleeps until its first timer, and no longer once a second.
	now += int64(wheel.ReleaseDelay)
	wakeAt = w.Step()
	require.Equal(t, 0, live(), "every closed connection released")
	now += ms
	wakeAt = w.Step()
	assert.Greater(t, wakeAt, now+int64(time.Minute), "no stops: sleep until the first timer")
	assert.False(t, w.WakeRequested())
	runtime.KeepAlive(open)
}

// TestSimulated_StopWakesLongSleep checks the other half of the release
// promise: a driver asleep until a timer an hour away is woken by a Stop,
// whether the Stop pushes the timer or cancels an arming still on the
// inbox, but not while it plans to wake within ReleaseDelay anyway.
func TestSimulated_StopWakesLongSleep(t *testing.T) {
	now := int64(time.Second)
	w := newSim(t, &now)
	held := w.AfterFunc(time.Hour, func() {})
	defer held.Stop()
	require.Greater(t, w.Step(), now+int64(time.Minute), "sleep until the timer's slot")

	tm := w.AfterFunc(2*time.Hour, func() {}) // pushed; no need to wake for it
	assert.False(t, w.WakeRequested(), "an arming after the planned wake-up")
	require.True(t, tm.Stop())
	assert.True(t, w.WakeRequested(), "a stop of an arming still on the inbox")
	wakeAt := w.Step()
	assert.Equal(t, now+int64(wheel.ReleaseDelay), wakeAt, "after taking in a stop: back within ReleaseDelay")

	tm.Reset(2 * time.Hour)
	now += ms
	require.True(t, tm.Stop())
	assert.False(t, w.WakeRequested(), "the driver is back within ReleaseDelay anyway")
	now = wakeAt
	wakeAt = w.Step()
	assert.Equal(t, now+int64(wheel.ReleaseDelay), wakeAt, "took in a stop")
	now = wakeAt
	wakeAt = w.Step()
	assert.Greater(t, wakeAt, now+int64(time.Minute), "no stops: the long sleep again")
	tm.Reset(2 * time.Hour)
	now += ms
	require.Equal(t, now-ms+int64(wheel.TakeEvery), w.Step(), "an arming left on the inbox: back for it within TakeEvery")
	require.True(t, tm.Stop())
	assert.False(t, w.WakeRequested(), "a stop on the inbox: the driver is back for it anyway")
	tm.Reset(2 * time.Hour)
	now += int64(wheel.TakeEvery)
	require.Greater(t, w.Step(), now+int64(time.Minute), "took the arming in: the long sleep again")
	require.True(t, tm.Stop())
	assert.True(t, w.WakeRequested(), "a stop of a timer the wheel holds")
}

// TestSimulated_Horizon runs a 100 µs wheel to the end of its 41-bit clock:
// nothing wraps, nothing fires early, a deadline within the clock fires, and
// one beyond it never does.
func TestSimulated_Horizon(t *testing.T) {
	tick := int64(wheel.MinTick)
	end := (int64(1)<<41 - 2) * tick // the clock's last tick
	now := end - 50*tick
	w := wheel.NewSimulated(func() int64 { return now }, wheel.WithTick(wheel.MinTick))
	t.Cleanup(w.Stop)
	w.Step()
	type fire struct{ at, due int64 }
	var within []*fire
	beyond := 0
	for _, d := range []time.Duration{0, time.Duration(10 * tick), time.Duration(40 * tick), time.Hour, w.MaxDuration()} {
		f := &fire{at: -1, due: now + int64(d)}
		tm := new(wheel.Timer)
		if f.due <= end {
			within = append(within, f)
			tm.Init(w, func() { f.at = now })
		} else {
			beyond++
			tm.Init(w, func() {
				t.Errorf("a deadline beyond the clock's end (%v after %v) fired", d, time.Duration(f.due-int64(d)))
			})
		}
		tm.Reset(d)
	}
	for range 200 {
		next := w.Step()
		if next == math.MaxInt64 {
			next = now + int64(time.Second)
		}
		now = max(now+1, next)
	}
	require.Len(t, within, 3)
	assert.Equal(t, 2, beyond)
	for i, f := range within {
		assert.GreaterOrEqual(t, f.at, f.due, "timer %d fired early, or not at all", i)
		assert.LessOrEqual(t, f.at, f.due+2*tick, "timer %d fired late", i)
	}
}

// TestSimulated_StopRearmChurn runs the churn of a timer that is stopped
// and at once armed again (as retransmit's timer is when nothing is in
// flight and then a message goes out), so that a woken driver often finds
// the timer pending again: the stops must still wake it only once or twice
// per ReleaseDelay (once for the stop, once when the short sleep that
// follows ends), not once per stop.
func TestSimulated_StopRearmChurn(t *testing.T) {
	now := int64(time.Second)
	w := newSim(t, &now)
	var tm wheel.Timer
	tm.Init(w, func() {})
	tm.ResetFrom(w.Elapsed()+1, time.Hour)
	wakeAt := w.Step()
	steps := 0
	for range 10_000 { // 10 s, one Stop and re-arm a millisecond
		now += ms + 7
		tm.Stop()
		tm.ResetFrom(w.Elapsed(), time.Hour) // before the woken driver takes the stop in
		if now >= wakeAt || w.WakeRequested() {
			wakeAt = w.Step()
			steps++
		}
	}
	t.Logf("%d wake-ups in 10 s", steps)
	assert.LessOrEqual(t, steps, 22, "the stops woke the driver more than twice a second")
}

// TestSimulated_CallbackStopNoWake: a Stop from a callback runs while the
// driver is awake, so it must not ask for a wake-up, even when the step
// before planned a long sleep (the simulated driver, like the real one,
// marks itself awake when it steps).
func TestSimulated_CallbackStopNoWake(t *testing.T) {
	now := int64(time.Second) + 7
	w := newSim(t, &now)
	b := w.AfterFunc(time.Hour, func() {})
	now += int64(2 * time.Second)
	w.Step()
	require.Greater(t, w.Step(), now+int64(time.Minute), "a long sleep")
	w.AfterFunc(5*time.Millisecond, func() { b.Stop() })
	now += 10 * ms
	wakeAt := w.Step() // fires the callback, whose stop waits on the inbox
	assert.False(t, w.WakeRequested(), "a stop from a callback woke the driver")
	assert.Equal(t, now+int64(wheel.TakeEvery), wakeAt, "back within TakeEvery for the stop")
	now = wakeAt
	w.Step()
	assert.Zero(t, w.Len())
}

// TestSimulated_QueuedRearmEarlierWakes arms a timer far off, which the
// driver, asleep until a slot an hour away, need not wake for, and then,
// before the driver has taken it in, arms it again for 10 ms: the second
// arming pushes nothing (the timer is on the inbox already), so it must
// wake the driver itself, or the timer fires when the driver next wakes,
// nearly an hour late.
func TestSimulated_QueuedRearmEarlierWakes(t *testing.T) {
	now := int64(time.Second) + 7
	w := newSim(t, &now)
	held := w.AfterFunc(time.Hour, func() {})
	defer held.Stop()
	now += int64(2 * time.Second) // the clock goes stale: armings are exact
	w.Step()
	require.Greater(t, w.Step(), now+int64(time.Minute), "a long sleep")
	fired := false
	var tm wheel.Timer
	tm.Init(w, func() { fired = true })
	tm.ResetFrom(w.Elapsed(), 2*time.Hour)
	require.False(t, w.WakeRequested(), "nothing to wake for yet")
	start := w.Elapsed()
	tm.ResetFrom(start, 10*time.Millisecond)
	require.True(t, w.WakeRequested(), "the earlier deadline of a queued timer must wake the driver")
	wakeAt := w.Step()
	for !fired {
		require.LessOrEqual(t, wakeAt, int64(start)+int64(20*time.Millisecond), "the driver plans to sleep past the deadline")
		now = wakeAt
		wakeAt = w.Step()
	}
	assert.GreaterOrEqual(t, now, int64(start)+int64(10*time.Millisecond), "never early")
}

// TestSimulated_LaterExactOnDueList: a coarse timer waits on the due list
// for a hold-back of about 200 ms (the driver ran that late while its tick
// was read), and is then armed from an exact instant a little later than
// its tick but well before the held-back time. Only storing the later
// deadline, as for a coarse one, would leave the driver asleep until the
// held-back time; the exact deadline must be kept, to within the tick.
func TestSimulated_LaterExactOnDueList(t *testing.T) {
	now := 10*ms + 7
	w := newSim(t, &now)
	w.Step() // tick 10 on the clock, kept fresh
	firedAt := int64(-1)
	var tm wheel.Timer
	tm.Init(w, func() { firedAt = now })
	now = 210*ms + 7 // the driver is 200 ms late; a reader still sees tick 10
	tm.Reset(5 * time.Second)
	wake := w.Step()
	require.Greater(t, w.MaxHoldBack(), 150*time.Millisecond)
	for now < 5011*ms+ms/4 { // until the slot of tick 5011 has been processed
		now = max(now+1, min(wake, 5011*ms+ms/4))
		wake = w.Step()
	}
	require.True(t, tm.Pending(), "held back on the due list")
	require.True(t, w.Stale())
	now += 3 * ms
	start := w.Elapsed()
	require.True(t, tm.ResetFrom(start, 10*time.Millisecond))
	for firedAt < 0 {
		if !w.WakeRequested() {
			now = max(now+1, wake)
		}
		wake = w.Step()
	}
	late := time.Duration(firedAt - int64(start) - 10*ms)
	t.Logf("fired %v after its exact deadline", late)
	assert.GreaterOrEqual(t, late, time.Duration(0), "never early")
	assert.LessOrEqual(t, late, 2*time.Millisecond)
}

// TestSimulated_LaterCoarseOnDueList: a coarse timer waits on the due list
// for a hold-back of about 300 ms, and is armed again from the coarse clock
// for 5 ms, either in a callback before the driver plans its sleep or in
// the batch-end hook after it, at the step where the driver stops keeping
// the clock. A later deadline only stored, as for a timer in a slot, would
// be planned by the old hold-back, or, its tick not yet over, not at all:
// the timer must fire about 5 ms after its arming.
func TestSimulated_LaterCoarseOnDueList(t *testing.T) {
	for _, tc := range []struct {
		name      string
		afterPlan bool // re-arm in the batch-end hook, after the plan
	}{
		{name: "re-armed before the plan"},
		{name: "re-armed after the plan", afterPlan: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := 10*ms + 7
			var x, y wheel.Timer
			rearm := false
			rearmAt, firedAt := int64(-1), int64(-1)
			w := wheel.NewSimulated(func() int64 { return now }, wheel.WithTick(time.Millisecond),
				wheel.WithBatchEnd(func() {
					if rearm { // after the step's plan, before the clock goes stale
						rearm = false
						rearmAt = now
						x.Reset(5 * time.Millisecond)
					}
				}))
			defer w.Stop()
			w.SetCanPrecise(false)
			x.Init(w, func() { firedAt = now })
			y.Init(w, func() {
				if tc.afterPlan {
					rearm = true
				} else {
					rearmAt = now
					x.Reset(5 * time.Millisecond)
				}
			})
			w.Step()
			x.Reset(990 * time.Millisecond) // coarse, from tick 10
			w.Step()
			now = 310*ms + 7 // the driver is 300 ms late: tick 10 held back ~300 ms
			y.ResetFrom(time.Duration(now), 700*time.Millisecond-7)
			wake := w.Step()
			for firedAt < 0 && now < 3000*ms {
				if !w.WakeRequested() {
					now = max(now+1, wake)
				}
				wake = w.Step()
			}
			require.GreaterOrEqual(t, rearmAt, int64(0), "re-armed")
			require.GreaterOrEqual(t, firedAt, int64(0), "fired")
			t.Logf("hold-back %v; re-armed at %v for 5 ms; fired %v after", w.MaxHoldBack(),
				time.Duration(rearmAt), time.Duration(firedAt-rearmAt))
			assert.GreaterOrEqual(t, firedAt-rearmAt, 5*ms, "never early")
			assert.LessOrEqual(t, firedAt-rearmAt, 10*ms, "fired late")
		})
	}
}

// TestSimulated_InboxTakenLazily: the driver leaves on the inbox what it need
// not file yet, so that timers armed and stopped again before it looks cost
// it nothing, and comes back within TakeEvery for it; an arming due within
// TakeLead it takes in at once.
func TestSimulated_InboxTakenLazily(t *testing.T) {
	now := 2 * int64(time.Second)
	w := newSim(t, &now)
	require.Equal(t, int64(math.MaxInt64), w.Step(), "nothing to do")
	tookAt := now

	far := w.AfterFunc(time.Hour, func() { t.Error("far timer fired") })
	now += ms
	assert.True(t, w.WakeRequested(), "the driver planned to sleep for good")
	require.Equal(t, tookAt+int64(wheel.TakeEvery), w.Step(), "left on the inbox: back for it within TakeEvery")
	assert.Zero(t, w.Len(), "not taken in yet")
	for range 100 { // armings and stops of a timer on the inbox push nothing
		far.Stop()
		far.Reset(time.Hour)
	}
	assert.False(t, w.WakeRequested())

	firedAt := int64(0)
	due := now + int64(wheel.TakeLead/2)
	w.AfterFunc(wheel.TakeLead/2, func() { firedAt = now })
	assert.True(t, w.WakeRequested(), "an arming before the planned wake-up")
	wakeAt := w.Step()
	assert.Equal(t, 2, w.Len(), "an arming due within TakeLead: the inbox taken in at once")
	for i := 0; firedAt == 0 && i < 10; i++ {
		require.LessOrEqual(t, wakeAt, due, "the plan skips the deadline")
		now = wakeAt
		wakeAt = w.Step()
	}
	assert.Equal(t, due, firedAt, "fired at its deadline")
	require.Greater(t, wakeAt, now+int64(time.Minute), "only the far timer left, taken in: the long sleep")
	assert.Equal(t, 1, w.Len())
}

// TestSimulated_TakeInPreciseWindow: a take of the inbox due within the last
// PreciseLead before a timer falls due is slept precisely too, or the
// runtime timer's late end would carry the driver past the deadline.
func TestSimulated_TakeInPreciseWindow(t *testing.T) {
	if !wheel.HavePreciseSleep {
		t.Skip("this system has no precise (futex) sleep")
	}
	now := 2*int64(time.Second) + 900*int64(time.Microsecond)
	w := newSim(t, &now)
	w.SetCanPrecise(true)
	fired := int64(-1)
	w.AfterFunc(wheel.TakeEvery, func() { fired = now }) // due at 2.251 s
	due := 2*int64(time.Second) + int64(wheel.TakeEvery) + ms
	wakeAt, precise := w.StepPlan()   // takes the inbox in at 2.0009 s
	w.AfterFunc(time.Hour, func() {}) // left on the inbox: back for it at 2.2509 s
	for i := 0; fired < 0 && i < 20; i++ {
		if precise {
			now = wakeAt
		} else {
			now = wakeAt + 900*int64(time.Microsecond) // a runtime-timer sleep ends late
		}
		wakeAt, precise = w.StepPlan()
	}
	assert.Equal(t, due, fired, "fired late: the last stretch was not slept precisely")
}

// TestSimulated_ClockKeptThroughSecondTakes: coarse armings count as a sign
// that the clock is read whichever of a step's two looks at the inbox takes
// them in. A timer re-armed from its callback within TakeLead makes every
// take a second take; the clock, read every tick, must stay fresh.
func TestSimulated_ClockKeptThroughSecondTakes(t *testing.T) {
	now := 2 * int64(time.Second)
	w := newSim(t, &now)
	var p *wheel.Timer
	p = w.AfterFunc(100*time.Millisecond, func() { p.Reset(100 * time.Millisecond) })
	var c [2]wheel.Timer
	for i := range c {
		c[i].Init(w, func() {})
	}
	w.Step()
	now += ms
	w.Now() // a coarse reader refreshes the clock: the driver keeps it
	start := now
	staleAt := int64(-1)
	for k := 0; now < start+int64(3*time.Second); k++ {
		if w.Stale() && staleAt < 0 {
			staleAt = now
		}
		c[k%2].Reset(time.Hour) // a coarse arming every tick, stopped a tick later
		c[(k+1)%2].Stop()
		for wake := w.Step(); ; wake = w.Step() {
			if wake > now {
				now = min(wake, now+ms)
				break
			}
		}
	}
	assert.Equal(t, int64(-1), staleAt, "the clock went stale after %v though read every tick", time.Duration(staleAt-start))
}

// TestSimulated_LenAfterStopCountsInbox: after Wheel.Stop, Len counts the
// timers still pending, those left on the inbox among them.
func TestSimulated_LenAfterStopCountsInbox(t *testing.T) {
	now := 2 * int64(time.Second)
	w := newSim(t, &now)
	w.Step()
	w.AfterFunc(time.Hour, func() {})
	now += ms
	w.Step()
	require.Zero(t, w.Len(), "left on the inbox")
	w.Stop()
	w.Exit()
	assert.Equal(t, 1, w.Len())
}
