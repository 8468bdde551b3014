package wheel_test

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Idle measurement: after arming, wait benchSettle (longer than the second
// for which the wheel keeps its coarse clock fresh after the last Reset),
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

// benchProcessCPU returns the user plus system CPU time of the process.
func benchProcessCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
