package wheel_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/wheel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNew_RejectsBadTick(t *testing.T) {
	for _, tick := range []time.Duration{wheel.MinTick, wheel.DefaultTick, wheel.MaxTick} {
		assert.NoError(t, wheel.Validate(wheel.WithTick(tick)), "tick %v", tick)
	}
	// Zero is the default, as Config.Tick 0 is in netserver.
	assert.NoError(t, wheel.Validate(wheel.WithTick(0)))
	got, err := wheel.ResolveTick(0)
	require.NoError(t, err)
	assert.Equal(t, wheel.DefaultTick, got)
	w := wheel.New(wheel.WithTick(0), wheel.WithClock(wheel.NewManualClock()))
	assert.Equal(t, wheel.DefaultTick, w.Tick())
	w.Stop()
	for _, tc := range []struct {
		name string
		tick time.Duration
	}{
		{name: "negative", tick: -time.Millisecond},
		{name: "below minimum", tick: wheel.MinTick - 1},
		{name: "above maximum", tick: wheel.MaxTick + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := "wheel: tick out of range: " + tc.tick.String() + " not in [100µs, 1h0m0s]"
			err := wheel.Validate(wheel.WithTick(tc.tick))
			require.ErrorIs(t, err, wheel.ErrTick)
			assert.EqualError(t, err, want)
			_, err = wheel.ResolveTick(tc.tick)
			assert.EqualError(t, err, want)
			assert.PanicsWithValue(t, want, func() { wheel.New(wheel.WithTick(tc.tick)) })
		})
	}
}

func TestTimer_MisuseIsClear(t *testing.T) {
	var tm wheel.Timer
	assert.PanicsWithValue(t, "wheel: Reset of a Timer that was not initialized (use Wheel.AfterFunc or Timer.Init)",
		func() { tm.Reset(time.Second) })
	assert.False(t, tm.Stop(), "Stop of an uninitialized timer reports nothing stopped")
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	assert.Panics(t, func() { tm.Init(nil, func() {}) })
	assert.Panics(t, func() { tm.Init(w, nil) })
	tm.Init(w, func() {})
	assert.PanicsWithValue(t, "wheel: Timer.Init called twice", func() { tm.Init(w, func() {}) })
	clk := wheel.NewManualClock()
	wheel.New(wheel.WithClock(clk))
	assert.PanicsWithValue(t, "wheel: ManualClock already drives a wheel", func() { wheel.New(wheel.WithClock(clk)) })
}

// TestManual_Steps walks one timer through its states at fixed instants.
func TestManual_Steps(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	var fired []time.Duration
	tm := w.AfterFunc(10*time.Millisecond, func() { fired = append(fired, clk.Now()) })

	for _, step := range []struct {
		name    string
		advance time.Duration
		action  func() bool
		want    bool // what action reports
		fired   []time.Duration
		pending bool
	}{
		{name: "not yet", advance: 9 * time.Millisecond, pending: true},
		{name: "reset later from 9ms", advance: 0, action: func() bool { return tm.Reset(10 * time.Millisecond) }, want: true, pending: true},
		{name: "old deadline passes", advance: 5 * time.Millisecond, pending: true},
		{name: "new deadline", advance: 5 * time.Millisecond, fired: []time.Duration{19 * time.Millisecond}},
		{name: "stop after fire", action: tm.Stop, want: false, fired: []time.Duration{19 * time.Millisecond}},
		{name: "re-arm", action: func() bool { return tm.Reset(time.Hour) }, want: false, fired: []time.Duration{19 * time.Millisecond}, pending: true},
		{name: "reset earlier", action: func() bool { return tm.Reset(2 * time.Millisecond) }, want: true, fired: []time.Duration{19 * time.Millisecond}, pending: true},
		{name: "earlier deadline", advance: 2 * time.Millisecond, fired: []time.Duration{19 * time.Millisecond, 21 * time.Millisecond}},
		{name: "arm zero", action: func() bool { return tm.Reset(0) }, want: false, fired: []time.Duration{19 * time.Millisecond, 21 * time.Millisecond}, pending: true},
		{name: "zero fires next tick", advance: time.Millisecond, fired: []time.Duration{19 * time.Millisecond, 21 * time.Millisecond, 22 * time.Millisecond}},
		{name: "arm and stop", action: func() bool { tm.Reset(time.Millisecond); return tm.Stop() }, want: true, fired: []time.Duration{19 * time.Millisecond, 21 * time.Millisecond, 22 * time.Millisecond}},
		{name: "stopped stays quiet", advance: time.Hour, fired: []time.Duration{19 * time.Millisecond, 21 * time.Millisecond, 22 * time.Millisecond}},
	} {
		clk.Advance(step.advance)
		if step.action != nil {
			assert.Equal(t, step.want, step.action(), step.name)
		}
		require.Equal(t, step.fired, fired, step.name)
		assert.Equal(t, step.pending, tm.Pending(), step.name)
		clk.Advance(0) // Len counts what the wheel has taken in
		assert.Equal(t, map[bool]int{true: 1}[step.pending], w.Len(), step.name)
	}
}

func TestManual_ClampsHugeDurations(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	fired := false
	tm := w.AfterFunc(time.Duration(1<<63-1), func() { fired = true })
	require.True(t, tm.Pending())
	clk.Advance(w.MaxDuration() + time.Second)
	assert.True(t, fired, "a duration past MaxDuration (%v) is clamped to it", w.MaxDuration())
}

func TestWheel_StoppedWheelIgnoresResets(t *testing.T) {
	w := wheel.New()
	tm := w.AfterFunc(time.Hour, func() { t.Error("fired after Stop") })
	stopped := w.AfterFunc(time.Hour, func() { t.Error("fired after Stop") })
	require.True(t, stopped.Stop())
	w.Stop()
	w.Stop() // idempotent
	for _, reset := range []func(*wheel.Timer) bool{
		func(tm *wheel.Timer) bool { return tm.Reset(time.Millisecond) },
		func(tm *wheel.Timer) bool { return tm.ResetFrom(w.Now(), time.Millisecond) },
		func(tm *wheel.Timer) bool { return tm.ResetFrom(0, time.Millisecond) },
	} {
		assert.True(t, reset(tm), "Reset reports Pending")
		assert.True(t, tm.Pending(), "Reset on a stopped wheel changes nothing")
		assert.False(t, reset(stopped), "Reset reports Pending")
		assert.False(t, stopped.Pending(), "Reset on a stopped wheel changes nothing")
	}
}

// Stops that the sleeping driver has not yet taken in when the wheel stops
// are still counted: Len after Stop is the number of timers that were
// pending then.
func TestWheel_LenAfterStopCountsLateStops(t *testing.T) {
	w := wheel.New()
	timers := make([]*wheel.Timer, 100)
	for i := range timers {
		timers[i] = w.AfterFunc(time.Hour, func() { t.Error("fired") })
	}
	require.Eventually(t, func() bool { return w.Len() == 100 }, 5*time.Second, time.Millisecond,
		"the driver takes in the armings")
	for _, tm := range timers[:60] {
		require.True(t, tm.Stop())
	}
	w.Stop()
	assert.Equal(t, 40, w.Len())
}

func TestWheel_Executor(t *testing.T) {
	clk := wheel.NewManualClock()
	var handed []func()
	w := wheel.New(wheel.WithClock(clk), wheel.WithExecutor(func(f func()) { handed = append(handed, f) }))
	ran := 0
	w.AfterFunc(time.Millisecond, func() { ran++ })
	clk.Advance(time.Millisecond)
	require.Len(t, handed, 1)
	assert.Zero(t, ran, "the executor decides when the callback runs")
	handed[0]()
	assert.Equal(t, 1, ran)
}

// TestWheel_RealClockStress arms, resets and stops timers from many
// goroutines while the wheel runs on the real clock. Every arming is
// accounted for exactly: its deadline (taken before the call) is recorded,
// a Reset of a pending timer replaces it, a successful Stop removes it, and
// each firing consumes the oldest one, which must be due. Every arming that
// was not stopped fires exactly once, none early, and nothing outlives Stop
// (TestMain checks for leaked goroutines).
// sleepModes runs f on a real-clock wheel that sleeps on the runtime's
// timer, and on one that sleeps in a system call.
func sleepModes(t *testing.T, f func(t *testing.T, w *wheel.Wheel)) {
	for _, tc := range []struct {
		name string
		opts []wheel.Option
	}{
		{name: "sleep=timer"},
		{name: "sleep=syscall", opts: []wheel.Option{wheel.WithSyscallSleep()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := wheel.New(tc.opts...)
			defer w.Stop()
			f(t, w)
		})
	}
}

func TestWheel_RealClockStress(t *testing.T) { sleepModes(t, testRealClockStress) }

func testRealClockStress(t *testing.T, w *wheel.Wheel) {
	const (
		workers   = 8
		perWorker = 200
		ops       = 3000
	)

	type stressTimer struct {
		t        wheel.Timer
		mu       sync.Mutex // held around each Reset/Stop and its bookkeeping, and by the callback
		deadline []int64    // the not-yet-fired armings' deadlines, ns since start, oldest first
		armings  int
		fires    int
		stops    int
		early    []string
	}
	start := time.Now()
	all := make([]*stressTimer, workers*perWorker)
	for i := range all {
		st := &stressTimer{}
		st.t.Init(w, func() {
			now := int64(time.Since(start))
			st.mu.Lock()
			defer st.mu.Unlock()
			st.fires++
			if len(st.deadline) == 0 {
				st.early = append(st.early, "fired with no arming outstanding")
				return
			}
			if now < st.deadline[0] {
				st.early = append(st.early, fmt.Sprintf("fired at %v, due at %v", time.Duration(now), time.Duration(st.deadline[0])))
			}
			st.deadline = st.deadline[1:]
		})
		all[i] = st
	}
	durs := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			mine := all[g*perWorker : (g+1)*perWorker]
			for i := range ops {
				st := mine[rng.IntN(len(mine))]
				st.mu.Lock()
				if rng.IntN(5) == 0 {
					if st.t.Stop() {
						st.stops++
						st.deadline = st.deadline[:len(st.deadline)-1]
					}
				} else {
					d := durs[rng.IntN(len(durs))]
					due := int64(time.Since(start)) + int64(d)
					if st.t.Reset(d) {
						st.deadline[len(st.deadline)-1] = due // the pending arming, moved
					} else {
						st.armings++
						st.deadline = append(st.deadline, due)
					}
				}
				st.mu.Unlock()
				if i%64 == 0 {
					time.Sleep(100 * time.Microsecond) // let the wheel's clock move between bursts
				}
			}
		}()
	}
	wg.Wait()
	// The remaining timers are due within 50ms; wait for them, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for w.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Zero(t, w.Len(), "timers still pending long after their deadlines")
	var armings, stops, fires int
	for i, st := range all {
		st.mu.Lock()
		assert.Empty(t, st.early, "timer %d", i)
		assert.Equal(t, st.armings-st.stops, st.fires, "timer %d: %d armings, %d stopped", i, st.armings, st.stops)
		assert.Empty(t, st.deadline, "timer %d: armings that never fired", i)
		armings, stops, fires = armings+st.armings, stops+st.stops, fires+st.fires
		st.mu.Unlock()
	}
	t.Logf("%d armings, %d stopped, %d fired", armings, stops, fires)
	assert.Positive(t, fires)
	assert.Positive(t, stops)
}

// TestWheel_IdleWheelSleeps checks that a wheel holding timers far in the
// future stops waking once armings stop: once it has counted them, it is
// given ReleaseDelay and a little more to notice it is idle, then must stay
// asleep for a further 500ms, while the timers are moved later.
func TestWheel_IdleWheelSleeps(t *testing.T) { sleepModes(t, testIdleWheelSleeps) }

func testIdleWheelSleeps(t *testing.T, w *wheel.Wheel) {
	timers := make([]wheel.Timer, 10000)
	for i := range timers {
		timers[i].Init(w, func() { t.Error("fired") })
		timers[i].Reset(time.Hour + time.Duration(i)*time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Len() != len(timers) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, len(timers), w.Len(), "the armings not counted %v after them", 5*time.Second)
	time.Sleep(wheel.ReleaseDelay + 200*time.Millisecond)
	before := w.Wakeups()
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		for i := range timers {
			timers[i].Reset(time.Hour + time.Duration(i)*time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, w.Wakeups()-before, uint64(1), "an idle wheel woke up")
	// And it comes back to life for a reset.
	fired := make(chan struct{})
	w.AfterFunc(time.Millisecond, func() { close(fired) })
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("a timer armed on a sleeping wheel never fired")
	}
	assert.Equal(t, 10001-1, w.Len())
}

func TestWheel_BatchEnd(t *testing.T) {
	clk := wheel.NewManualClock()
	var log []string
	w := wheel.New(wheel.WithClock(clk), wheel.WithBatchEnd(func() { log = append(log, "end") }))
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond} {
		w.AfterFunc(d, func() { log = append(log, d.String()) })
	}
	clk.Advance(time.Second)
	clk.Advance(time.Second) // nothing fires: no batch end
	slices.Sort(log[:3])
	assert.Equal(t, []string{"1ms", "2ms", "2ms", "end"}, log)
}

func TestTimer_ResetFrom(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	var fired []time.Duration
	tm := w.AfterFunc(time.Hour, func() { fired = append(fired, clk.Now()) })
	clk.Advance(5 * time.Millisecond)
	stamp := w.Now()
	clk.Advance(3 * time.Millisecond)
	assert.True(t, tm.ResetFrom(stamp, 10*time.Millisecond), "it was pending")
	clk.Advance(6 * time.Millisecond) // 14ms
	assert.Empty(t, fired)
	clk.Advance(time.Millisecond) // 15ms = stamp + 10ms
	assert.Equal(t, []time.Duration{15 * time.Millisecond}, fired)
	// A deadline already past fires on the next tick.
	assert.False(t, tm.ResetFrom(stamp, time.Millisecond))
	clk.Advance(time.Millisecond)
	assert.Equal(t, []time.Duration{15 * time.Millisecond, 16 * time.Millisecond}, fired)
	// A stamp from the future counts from then.
	tm.ResetFrom(time.Hour, time.Millisecond)
	clk.Advance(time.Millisecond)
	assert.Len(t, fired, 2)
	// Any instant: the first tick at or after from+d.
	clk.Advance(300 * time.Microsecond) // 17.3 ms
	exact := w.Now()
	clk.Advance(2 * time.Millisecond) // 19.3 ms
	tm.ResetFrom(exact, 3*time.Millisecond)
	clk.Advance(time.Millisecond) // 20.3 ms
	assert.Len(t, fired, 2)
	clk.Advance(time.Millisecond) // 21.3 ms: past 20.3 ms, at the tick boundary 21 ms
	assert.Equal(t, 21*time.Millisecond, fired[len(fired)-1])
}

func TestWheel_Now(t *testing.T) {
	t.Run("manual", func(t *testing.T) {
		clk := wheel.NewManualClock()
		w := wheel.New(wheel.WithClock(clk))
		defer w.Stop()
		clk.Advance(1500 * time.Microsecond)
		assert.Equal(t, 1500*time.Microsecond, w.Now(), "exact, not rounded")
	})
	t.Run("real", func(t *testing.T) {
		w := wheel.New()
		defer w.Stop()
		prev := w.Now()
		for range 1000 {
			now := w.Now()
			require.GreaterOrEqual(t, now, prev, "the clock went backwards")
			prev = now
		}
	})
}
