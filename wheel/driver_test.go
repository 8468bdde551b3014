package wheel_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/wheel"
)

// TestSleepPlan steps through the driver's sleep decision.
func TestSleepPlan(t *testing.T) {
	const (
		now     = int64(10 * time.Millisecond)
		none    = int64(math.MaxInt64)
		lead    = int64(wheel.PreciseLead)
		release = int64(wheel.ReleaseDelay)
	)
	for _, tc := range []struct {
		name              string
		fireAt, releaseAt int64
		canPrecise        bool
		until             int64
		precise           bool
	}{
		{name: "nothing held: sleep until woken", fireAt: none, releaseAt: none, until: none},
		{name: "nothing held, futex: sleep until woken", fireAt: none, releaseAt: none, canPrecise: true, until: none},
		{name: "timers held, nothing to take: sleep until the first", fireAt: now + 10*release, releaseAt: none, until: now + 10*release},
		{name: "a release comes first", fireAt: now + 10*release, releaseAt: now + release, until: now + release},
		{name: "a timer within the lead: precise", fireAt: now + lead, releaseAt: now + release, canPrecise: true, until: now + lead, precise: true},
		{name: "a release within the lead of a timer: precise", fireAt: now + lead, releaseAt: now + lead/2, canPrecise: true, until: now + lead/2, precise: true},
		{name: "a release alone: not precise", fireAt: none, releaseAt: now + lead/2, canPrecise: true, until: now + lead/2},
		{name: "a timer further off: wake the lead before it", fireAt: now + 3*lead, releaseAt: none, canPrecise: true, until: now + 2*lead},
		{name: "a release before the lead-in", fireAt: now + 2*release, releaseAt: now + release, canPrecise: true, until: now + release},
		{name: "no futex: never precise", fireAt: now + lead/2, releaseAt: none, until: now + lead/2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			until, precise := wheel.SleepPlan(now, tc.fireAt, tc.releaseAt, tc.canPrecise)
			assert.Equal(t, time.Duration(tc.until), time.Duration(until), "until")
			assert.Equal(t, tc.precise, precise, "precise")
			assert.Greater(t, until, now, "the driver always sleeps")
		})
	}
}

// TestWheel_PastRearmDoesNotSpin checks on the real clock that a callback
// that re-arms its timer for an instant already past makes the wheel fire
// it once per tick, not loop: the goroutine wakes a bounded number of times
// a tick (a spinning driver wakes thousands of times in the window). Both
// ways of arming are covered: from an instant in the past (ResetFrom,
// which the wheel files at the next tick) and from the clock (Reset with a
// negative duration).
func TestWheel_PastRearmDoesNotSpin(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rearm        func(w *wheel.Wheel, tm *wheel.Timer)
		wakesPerTick uint64
	}{
		{
			name: "exact instant",
			// 1 ns since start: in the past.
			rearm:        func(_ *wheel.Wheel, tm *wheel.Timer) { tm.ResetFrom(time.Nanosecond, 0) },
			wakesPerTick: 2,
		},
		{
			name:         "clock",
			rearm:        func(_ *wheel.Wheel, tm *wheel.Timer) { tm.Reset(-time.Second) },
			wakesPerTick: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := wheel.New()
			defer w.Stop()
			var fires atomic.Int64
			var stop atomic.Bool
			tm := new(wheel.Timer)
			tm.Init(w, func() {
				fires.Add(1)
				if !stop.Load() {
					tc.rearm(w, tm)
				}
			})
			start, w0 := time.Now(), w.Wakeups()
			tc.rearm(w, tm)
			time.Sleep(200 * time.Millisecond) // the test measures a rate over this window
			stop.Store(true)
			elapsed, wakeups := time.Since(start), w.Wakeups()-w0
			ticks := uint64(elapsed / w.Tick())
			t.Logf("%d fires, %d wake-ups in %v (%d ticks)", fires.Load(), wakeups, elapsed, ticks)
			assert.LessOrEqual(t, wakeups, tc.wakesPerTick*ticks+10, "the wheel spun")
			assert.LessOrEqual(t, uint64(fires.Load()), ticks+2, "more than one firing per tick")
			assert.Positive(t, fires.Load())
		})
	}
}

// TestWheel_PushLoadWakesBounded keeps the inbox busy from a goroutine
// (timers moved earlier, moved later at once, and armed anew) and checks
// that the wheel's goroutine wakes only for what it is pushed, a
// deadline before its planned wake-up, about once or twice a tick, instead
// of stepping again whenever it finds the inbox non-empty.
func TestWheel_PushLoadWakesBounded(t *testing.T) {
	w := wheel.New()
	defer w.Stop()
	timers := make([]wheel.Timer, 4096)
	for i := range timers {
		timers[i].Init(w, func() {})
		timers[i].Reset(time.Hour)
	}
	var stop atomic.Bool
	var pushes atomic.Int64
	var wg sync.WaitGroup
	start, w0 := time.Now(), w.Wakeups()
	for g := range 1 { // leave the wheel's goroutine a P
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			n := int64(0)
			for !stop.Load() {
				tm := &timers[rng.IntN(len(timers))]
				switch rng.IntN(3) {
				case 0:
					tm.Reset(time.Hour) // later: stored
					tm.Reset(time.Minute)
				case 1:
					tm.Stop()
					tm.Reset(time.Hour)
				default:
					tm.Reset(5 * time.Millisecond) // earlier: pushed
					tm.Reset(time.Hour)
				}
				n++
			}
			pushes.Add(n)
		}()
	}
	time.Sleep(300 * time.Millisecond) // the test measures a rate over this window
	stop.Store(true)
	wg.Wait()
	elapsed, wakeups := time.Since(start), w.Wakeups()-w0
	ticks := uint64(elapsed / w.Tick())
	t.Logf("%d push rounds, %d wake-ups in %v (%d ticks)", pushes.Load(), wakeups, elapsed, ticks)
	assert.LessOrEqual(t, wakeups, 2*ticks+10, "more than two wake-ups per tick under push load")
}

// TestTimer_ConcurrentResetStop calls Reset, ResetFrom (from Now) and Stop
// on the same timers from several goroutines at once, without any lock
// around the calls. Every
// arming ends exactly once, by a firing or by a Stop that reports it:
// firings plus successful stops equal the Resets that report a new arming.
// And no firing comes before its duration has passed since the earliest
// Reset that can have set its deadline (one that returned after the firing
// before the previous one began).
func TestTimer_ConcurrentResetStop(t *testing.T) { sleepModes(t, testConcurrentResetStop) }

func testConcurrentResetStop(t *testing.T, w *wheel.Wheel) {
	const (
		timers     = 16
		goroutines = 4
		ops        = 4000
		d          = 2 * time.Millisecond
	)
	type call struct{ start, end int64 }
	type shared struct {
		t       wheel.Timer
		mu      sync.Mutex // guards the records below, never held around a call
		calls   []call     // Resets, in no particular order
		fires   []int64
		armings int // Resets that reported a new arming
		stops   int // Stops that reported a pending timer
	}
	all := make([]*shared, timers)
	for i := range all {
		s := &shared{}
		s.t.Init(w, func() {
			now := int64(w.Now())
			s.mu.Lock()
			s.fires = append(s.fires, now)
			s.mu.Unlock()
		})
		all[i] = s
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for i := range ops {
				s := all[rng.IntN(timers)]
				if rng.IntN(4) == 0 {
					stopped := s.t.Stop()
					s.mu.Lock()
					if stopped {
						s.stops++
					}
					s.mu.Unlock()
				} else {
					start := int64(w.Now())
					var armed bool
					if rng.IntN(2) == 0 {
						armed = !s.t.Reset(d) // reads the clock
					} else {
						armed = !s.t.ResetFrom(w.Now(), d) // from a stamp
					}
					end := int64(w.Now())
					s.mu.Lock()
					s.calls = append(s.calls, call{start, end})
					if armed {
						s.armings++
					}
					s.mu.Unlock()
				}
				if i%64 == 0 {
					time.Sleep(3 * time.Millisecond) // let timers fire between bursts
				}
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		for _, s := range all {
			if s.t.Pending() {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "timers still pending long after their deadlines")
	w.Stop() // wait for the last callback
	assert.Zero(t, w.Len())
	fires := 0
	for i, s := range all {
		s.mu.Lock()
		assert.Equal(t, s.armings, len(s.fires)+s.stops, "timer %d: armings = firings + successful stops", i)
		slices.Sort(s.fires)
		for k, f := range s.fires {
			since := int64(math.MinInt64)
			if k >= 2 {
				since = s.fires[k-2]
			}
			earliest := int64(math.MaxInt64)
			for _, c := range s.calls {
				if c.end >= since {
					earliest = min(earliest, c.start)
				}
			}
			assert.GreaterOrEqual(t, f, earliest+int64(d), "timer %d: firing %d early", i, k)
		}
		fires += len(s.fires)
		s.mu.Unlock()
	}
	t.Logf("%d firings", fires)
	assert.Positive(t, fires)
}

// TestManual_StopWaitsForAdvance checks that Stop on a manual wheel waits
// for a callback that Advance is running, and that nothing fires after.
func TestManual_StopWaitsForAdvance(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	started, release := make(chan struct{}), make(chan struct{})
	var done atomic.Bool
	w.AfterFunc(time.Millisecond, func() {
		close(started)
		<-release
		done.Store(true)
	})
	w.AfterFunc(2*time.Millisecond, func() { t.Error("fired after Stop") })
	go clk.Advance(time.Second)
	<-started
	stopped := make(chan struct{})
	go func() {
		w.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("Stop returned while Advance ran a callback")
	case <-time.After(50 * time.Millisecond): // a negative check: Stop must still be waiting
	}
	close(release)
	<-stopped
	assert.True(t, done.Load(), "the callback finished before Stop returned")
	clk.Advance(time.Second)
}
