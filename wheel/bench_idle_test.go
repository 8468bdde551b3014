package wheel_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Idle measurement: after arming, wait benchSettle (longer than the second
// after which the wheel takes its inbox in once more after the armings),
// then measure over benchIdleWindow of real time.
const (
	benchSettle     = 1500 * time.Millisecond
	benchIdleWindow = 2 * time.Second
)

// BenchmarkWheel_Idle measures what a wheel holding 1M timers armed for an
// hour costs while nothing is reset and nothing falls due: the CPU time of
// the whole process (all threads, so it includes the Go runtime's own
// background work) per second of real time, metric cpu-ms/s. One op is one
// idle window of benchIdleWindow; -benchtime=100ms runs exactly one. The
// same process holding 1M time.AfterFunc timers is the baseline (impl=stdlib),
// and the same process holding 1M records of a Timer's size and no timer at
// all is the floor (impl=none): what the runtime's own background work costs
// with a heap of that shape. impl=wake-1s adds to the floor one goroutine
// that sleeps a second in a loop: what a wheel that woke once a second
// would cost the process. For the wheel, wakeups/s counts how often its
// goroutine woke.
func BenchmarkWheel_Idle(b *testing.B) {
	const n = 1_000_000
	for _, impl := range []string{"wheel", "none", "wake-1s", "stdlib"} {
		b.Run("impl="+impl+"/timers=1000000", func(b *testing.B) {
			benchIdle(b, impl, n)
		})
	}
}

func benchIdle(b *testing.B, impl string, n int) {
	var s *benchTimers
	var floor []*floorRecord
	if impl == "none" || impl == "wake-1s" {
		s = new(benchTimers)
		floor = make([]*floorRecord, n)
		for k := range floor {
			floor[k] = new(floorRecord)
		}
		runtime.GC()
		if impl == "wake-1s" {
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					select {
					case <-t.C:
					case <-stop:
						return
					}
				}
			}()
			b.Cleanup(func() { close(stop); <-done })
		}
	} else {
		s = newBenchTimers(b, impl, n)
	}
	time.Sleep(benchSettle)
	var cpu, wall time.Duration
	var wakeups uint64
	for b.Loop() {
		var w0 uint64
		if s.w != nil {
			w0 = s.w.Wakeups()
		}
		c0, t0 := benchProcessCPU(b), time.Now()
		time.Sleep(benchIdleWindow)
		cpu += benchProcessCPU(b) - c0
		wall += time.Since(t0)
		if s.w != nil {
			wakeups += s.w.Wakeups() - w0
		}
	}
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/wall.Seconds(), "cpu-ms/s")
	if s.w != nil {
		b.ReportMetric(float64(wakeups)/wall.Seconds(), "wakeups/s")
		if got := s.w.Len(); got != n {
			b.Fatalf("Len() = %d after idling, want %d", got, n)
		}
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(floor)
}

// BenchmarkWheel_WakeupsUnderResets holds 1M timers armed for an hour and
// resets random ones with Reset from two goroutines, paced at about 1M
// resets a second in all, for 5 s (one op), and reports how often the
// wheel's goroutine woke (wakeups/s) and the reset rate reached
// (resets/s). Moving a deadline later is only stored, so the goroutine
// sleeps until the timers' slot; run it with -benchtime=1x.
func BenchmarkWheel_WakeupsUnderResets(b *testing.B) {
	const (
		n      = 1_000_000
		rate   = 1_000_000
		window = 5 * time.Second
	)
	s := newBenchTimers(b, "wheel", n)
	time.Sleep(benchSettle)
	var wakeups, resets float64
	var wall time.Duration
	for b.Loop() {
		w0, start := s.w.Wakeups(), time.Now()
		var done atomic.Int64
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, i := int64(0), g*benchSeqLen/2
				for el := time.Since(start); el < window; el = time.Since(start) {
					for target := int64(el.Seconds() * rate / 2); k < target; k++ {
						s.wt[s.seq[i&(benchSeqLen-1)]].Reset(benchLong)
						i++
					}
					time.Sleep(200 * time.Microsecond)
				}
				done.Add(k)
			}()
		}
		wg.Wait()
		wall += time.Since(start)
		wakeups += float64(s.w.Wakeups() - w0)
		resets += float64(done.Load())
	}
	b.ReportMetric(wakeups/wall.Seconds(), "wakeups/s")
	b.ReportMetric(resets/wall.Seconds(), "resets/s")
}

// benchProcessCPU returns the user plus system CPU time of the process.
func benchProcessCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
