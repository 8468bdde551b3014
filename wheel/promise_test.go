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
// timers while the driver is 20 ms late (it last ran at tick 0), in each
// way a timer can be armed, lets the driver catch up, and then jumps to
// just before each deadline: none may fire before its duration has passed
// since the call (or, for a stamp, since the Now call that returned it).
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
		{name: "Reset later (lazy)", pre: time.Millisecond,
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				require.True(t, tm.Reset(d))
				return *now
			}},
		{name: "Reset earlier (pushed)", pre: 100 * 365 * 24 * time.Hour,
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				require.True(t, tm.Reset(d))
				return *now
			}},
		{name: "stamp", pre: time.Millisecond,
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				stamp := w.Now()
				require.Equal(t, time.Duration(*now), stamp, "Now is exact")
				tm.ResetFrom(stamp, d)
				return *now
			}},
		{name: "old stamp",
			arm: func(w *wheel.Wheel, tm *wheel.Timer, now *int64, d time.Duration) int64 {
				stamp, at := w.Now(), *now
				// The driver catches up and sleeps until half the
				// duration has passed; then the stamp is used.
				w.Step()
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
				w.Step() // the driver runs at tick 0
				now = lateAt
				ref := tc.arm(w, &tm, &now, d)
				due := ref + int64(d)
				// The driver catches up, and sleeps (or is late) until
				// just before the deadline.
				w.Step()
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
				assert.LessOrEqual(t, fired, due+ms, "fired %v late", time.Duration(fired-due))
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
	}{
		{name: "exact instant", rearm: func(w *wheel.Wheel, tm *wheel.Timer, now int64) {
			tm.ResetFrom(time.Duration(now-3*ms+1), 0)
		}},
		{name: "old stamp", rearm: func(w *wheel.Wheel, tm *wheel.Timer, now int64) {
			tm.ResetFrom(time.Duration(ms), time.Millisecond)
		}},
		{name: "negative duration", rearm: func(w *wheel.Wheel, tm *wheel.Timer, now int64) {
			tm.Reset(-1500 * time.Microsecond)
		}},
		{name: "zero duration", rearm: func(w *wheel.Wheel, tm *wheel.Timer, now int64) {
			tm.Reset(0)
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
				assert.Equal(t, (6+int64(i))*ms, at, "firing %d: one per tick, from the tick after the arming", i)
			}
		})
	}
}

// TestSimulated_StoppedReleased runs connection churn on a wheel armed only
// from exact instants (as netserver's is), whose driver sleeps as long as
// it may: 2 000 connections a second open, arm a
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
	w.Step() // takes the armings in: back within ReleaseDelay for more
	now += int64(wheel.ReleaseDelay)
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

	// The churn ends: one more wake-up takes in the last stops, and then,
	// when the next finds nothing, the driver sleeps until its first
	// timer, and no longer once a second.
	now += int64(wheel.ReleaseDelay)
	wakeAt = w.Step()
	require.Equal(t, 0, live(), "every closed connection released")
	now = wakeAt
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
	w.Step()
	now += int64(wheel.ReleaseDelay)
	require.Greater(t, w.Step(), now+int64(time.Minute), "sleep until the timer's slot")

	tm := w.AfterFunc(2*time.Hour, func() {})
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
	require.True(t, w.WakeRequested(), "an arming during a long sleep: counted within ReleaseDelay")
	now += ms
	wakeAt = w.Step()
	now = wakeAt
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
	tm.ResetFrom(w.Now()+1, time.Hour)
	wakeAt := w.Step()
	steps := 0
	for range 10_000 { // 10 s, one Stop and re-arm a millisecond
		now += ms + 7
		tm.Stop()
		tm.ResetFrom(w.Now(), time.Hour) // before the woken driver takes the stop in
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
	now += int64(wheel.ReleaseDelay)
	require.Greater(t, w.Step(), now+int64(time.Minute), "a long sleep")
	w.AfterFunc(5*time.Millisecond, func() { b.Stop() })
	now += 10 * ms
	wakeAt := w.Step() // fires the callback, whose stop waits on the inbox
	assert.False(t, w.WakeRequested(), "a stop from a callback woke the driver")
	assert.Equal(t, now+int64(wheel.ReleaseDelay), wakeAt, "back within ReleaseDelay for the stop")
	now = wakeAt
	w.Step()
	assert.Zero(t, w.Len())
}

// TestSimulated_QueuedRearmEarlierWakes arms a timer far off, which the
// driver, asleep until a slot under a second away, need not wake for, and then,
// before the driver has taken it in, arms it again for 10 ms: the second
// arming pushes nothing (the timer is on the inbox already), so it must
// wake the driver itself, or the timer fires when the driver next wakes,
// nearly a second late.
func TestSimulated_QueuedRearmEarlierWakes(t *testing.T) {
	now := int64(time.Second) + 7
	w := newSim(t, &now)
	held := w.AfterFunc(900*time.Millisecond, func() {})
	defer held.Stop()
	w.Step()
	now += 1
	require.Less(t, w.Step(), now+int64(wheel.ReleaseDelay), "a sleep until the held timer")
	fired := false
	var tm wheel.Timer
	tm.Init(w, func() { fired = true })
	tm.ResetFrom(w.Now(), 2*time.Hour)
	require.False(t, w.WakeRequested(), "nothing to wake for yet")
	start := w.Now()
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

// TestSimulated_RearmInStep: a timer held for an hour is armed again for
// 5 ms while the driver steps, either in a callback before the driver plans
// its sleep or in the batch-end hook after it: the earlier deadline must
// wake the driver (or be planned for), and the timer fire 5 ms after its
// arming, at its tick.
func TestSimulated_RearmInStep(t *testing.T) {
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
					if rearm { // after the step's plan
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
			x.Reset(time.Hour)
			y.ResetFrom(w.Now(), 700*time.Millisecond-7)
			wake := w.Step()
			for firedAt < 0 && now < 3000*ms {
				if !w.WakeRequested() {
					now = max(now+1, wake)
				}
				wake = w.Step()
			}
			require.GreaterOrEqual(t, rearmAt, int64(0), "re-armed")
			require.GreaterOrEqual(t, firedAt, int64(0), "fired")
			assert.Equal(t, 715*ms, firedAt, "re-armed at %v for 5 ms: at its tick", time.Duration(rearmAt))
		})
	}
}

// TestSimulated_LaterDeadlineStoredLazily: a timer moved later is only
// stored, without waking the driver; when its old slot comes round the
// driver files it again, and it fires at its new tick, never at the old.
func TestSimulated_LaterDeadlineStoredLazily(t *testing.T) {
	now := 5*ms + 7
	w := newSim(t, &now)
	firedAt := int64(-1)
	var tm wheel.Timer
	tm.Init(w, func() { firedAt = now })
	w.SetCanPrecise(false)
	tm.Reset(100 * time.Millisecond) // 105.007 ms: tick 106
	w.Step()
	for i := range 30 { // a packet a millisecond moves it later
		now += ms
		require.True(t, tm.Reset(100*time.Millisecond))
		require.False(t, w.WakeRequested(), "step %d: a later deadline woke the driver", i)
	}
	wake := w.Step()
	for firedAt < 0 && now < 300*ms {
		now = max(now+1, wake)
		wake = w.Step()
	}
	assert.Equal(t, 136*ms, firedAt, "armed last at 35.007 ms for 100 ms: at tick 136")
}

// TestSimulated_InboxTakenLazily: the driver leaves on the inbox what it
// need not file yet, so that timers armed and stopped again before it looks
// cost it nothing, and comes back within ReleaseDelay for it; an arming due
// before then it takes in when it falls due.
func TestSimulated_InboxTakenLazily(t *testing.T) {
	now := 2 * int64(time.Second)
	w := newSim(t, &now)
	w.SetCanPrecise(false)
	require.Equal(t, int64(math.MaxInt64), w.Step(), "nothing to do")

	far := w.AfterFunc(time.Hour, func() { t.Error("far timer fired") })
	assert.True(t, w.WakeRequested(), "the driver planned to sleep for good")
	now += ms
	tookAt := now
	require.Equal(t, tookAt+int64(wheel.ReleaseDelay), w.Step(), "took it in: back within ReleaseDelay")
	assert.Equal(t, 1, w.Len())
	for range 100 { // armings and stops of a timer on the inbox push nothing
		far.Stop()
		far.Reset(time.Hour)
	}
	assert.False(t, w.WakeRequested())
	now += ms
	require.Equal(t, tookAt+int64(wheel.ReleaseDelay), w.Step(), "left on the inbox")

	firedAt := int64(0)
	due := now + 300*ms
	w.AfterFunc(300*time.Millisecond, func() { firedAt = now })
	assert.True(t, w.WakeRequested(), "an arming before the planned wake-up")
	wakeAt := w.Step()
	assert.Equal(t, due, wakeAt, "planned for the arming's deadline, without taking it in")
	assert.Equal(t, 1, w.Len(), "not taken in before it falls due")
	now = wakeAt
	wakeAt = w.Step()
	assert.Equal(t, due, firedAt, "fired at its deadline")
	assert.Equal(t, 1, w.Len(), "the far timer, armed again, still counted")
	assert.Equal(t, now+int64(wheel.ReleaseDelay), wakeAt, "took things in: back within ReleaseDelay")
	now = wakeAt
	require.Greater(t, w.Step(), now+int64(time.Minute), "nothing left to take: the long sleep")
}

// TestSimulated_LenAfterStopCountsInbox: after Wheel.Stop, Len counts the
// timers still pending, those left on the inbox among them.
func TestSimulated_LenAfterStopCountsInbox(t *testing.T) {
	now := 2 * int64(time.Second)
	w := newSim(t, &now)
	w.Step()
	w.AfterFunc(time.Hour, func() {})
	require.Zero(t, w.Len(), "left on the inbox")
	w.Stop()
	w.Exit()
	assert.Equal(t, 1, w.Len())
}
