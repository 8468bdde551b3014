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

// simulate drives a real-clock wheel on a simulated clock. Resets happen at
// arbitrary instants; the driver wakes when it asked to, except that with
// probability lateProb it wakes up to maxLate late (a descheduled goroutine),
// and resetters keep reading whatever tick it last published meanwhile.
func simulate(t *testing.T, seed uint64, lateProb float64, maxLate time.Duration) (lateness []int64) {
	const tick = time.Millisecond
	rng := rand.New(rand.NewPCG(seed, 11))
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
	for range 20000 {
		// The next thing to happen: a reset/stop after a random gap, or the driver.
		gap := int64(rng.ExpFloat64() * float64(300*time.Microsecond))
		if driverAt <= now+gap {
			now = max(now, driverAt)
			wakeAt = w.Step()
			driverAt = wakeAt
			if driverAt != math.MaxInt64 && rng.Float64() < lateProb {
				driverAt += rng.Int64N(int64(maxLate))
			}
			continue
		}
		now += gap
		st := &timers[rng.IntN(len(timers))]
		if rng.IntN(8) == 0 {
			stopped := st.t.Stop()
			require.Equal(t, st.pending, stopped)
			st.pending = false
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
		lateness = append(lateness, timers[i].lateness...)
	}
	return lateness
}

// TestSimulated_NeverEarly checks the promise that survives a late driver: a
// timer never fires before its duration, however stale the tick it read.
func TestSimulated_NeverEarly(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			simulate(t, seed, 0.2, 20*time.Millisecond)
		})
	}
}

// TestSimulated_OnTimeLateness checks the other bound when the driver wakes
// when it asked to: at most the duration rounded up to the tick, plus one
// tick, plus the quarter-tick slack.
func TestSimulated_OnTimeLateness(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			late := simulate(t, seed, 0, 1)
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
	w := wheel.NewSimulated(func() int64 { return now }, wheel.WithTick(time.Millisecond))
	defer w.Stop()
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
	w := wheel.NewSimulated(func() int64 { return now }, wheel.WithTick(time.Millisecond))
	defer w.Stop()
	w.AfterFunc(time.Hour, func() {})
	w.Step()
	require.Zero(t, w.Hiccups())
	now = int64(7*time.Millisecond) + 1 // six ticks late
	w.Step()
	require.Equal(t, 1, w.Hiccups())
}
