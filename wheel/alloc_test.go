package wheel_test

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/wheel"
)

// TestTimer_ZeroAlloc asserts that the hot paths of an embedded Timer
// allocate nothing, on a manual clock and on the real clock (whose Reset
// takes a different path: the monotonic clock instead of the manual one).
func TestTimer_ZeroAlloc(t *testing.T) {
	clocks := []struct {
		name string
		new  func() *wheel.Wheel
	}{
		{name: "manual", new: func() *wheel.Wheel { return wheel.New(wheel.WithClock(wheel.NewManualClock())) }},
		{name: "real", new: func() *wheel.Wheel { return wheel.New() }},
	}
	cases := []struct {
		name string
		// op is measured; arm says whether the timer is pending before the
		// first run. d is a counter op may use to move the deadline.
		arm bool
		op  func(tm *wheel.Timer, d *time.Duration)
	}{
		{
			name: "reset pending, same deadline",
			arm:  true,
			op:   func(tm *wheel.Timer, _ *time.Duration) { tm.Reset(time.Hour) },
		},
		{
			name: "reset pending, later deadline",
			arm:  true,
			op: func(tm *wheel.Timer, d *time.Duration) {
				*d += time.Second
				tm.Reset(time.Hour + *d)
			},
		},
		{
			name: "reset pending, earlier deadline",
			arm:  true,
			op: func(tm *wheel.Timer, d *time.Duration) {
				*d += time.Second
				tm.Reset(time.Hour - *d)
			},
		},
		{
			name: "reset pending from an exact instant",
			arm:  true,
			op: func(tm *wheel.Timer, d *time.Duration) {
				*d += time.Microsecond
				tm.ResetFrom(time.Millisecond+*d+1, time.Hour)
			},
		},
		{
			name: "arm stopped timer, then stop",
			arm:  false,
			op: func(tm *wheel.Timer, _ *time.Duration) {
				tm.Reset(time.Hour)
				tm.Stop()
			},
		},
		{
			name: "stop not pending",
			arm:  false,
			op:   func(tm *wheel.Timer, _ *time.Duration) { tm.Stop() },
		},
	}
	for _, clk := range clocks {
		for _, tc := range cases {
			t.Run(clk.name+"/"+tc.name, func(t *testing.T) {
				w := clk.new()
				defer w.Stop()
				var tm wheel.Timer
				tm.Init(w, func() { t.Error("timer fired") })
				if tc.arm {
					require.False(t, tm.Reset(time.Hour), "first Reset of a stopped timer")
				}
				var d time.Duration
				allocs := testing.AllocsPerRun(100, func() { tc.op(&tm, &d) })
				assert.Zero(t, allocs, "allocations per run")
				assert.Equal(t, tc.arm, tm.Pending(), "pending after the runs")
			})
		}
	}
}

// TestTimer_Footprint asserts that a wheel holding many embedded timers costs
// under 64 bytes of heap per timer, the Timer included, measured as the heap
// growth of a wheel with 100k armed timers sharing one callback.
func TestTimer_Footprint(t *testing.T) {
	const n = 100_000
	size := unsafe.Sizeof(wheel.Timer{})
	perTimer := benchFootprint(n, func() any {
		clk := wheel.NewManualClock()
		w := wheel.New(wheel.WithClock(clk))
		ts := make([]wheel.Timer, n)
		f := func() {}
		for i := range ts {
			ts[i].Init(w, f)
			ts[i].Reset(time.Hour)
		}
		clk.Advance(0) // the wheel takes them in
		require.Equal(t, n, w.Len())
		return ts
	})
	t.Logf("unsafe.Sizeof(wheel.Timer{}) = %d B; heap per armed timer = %.1f B", size, perTimer)
	assert.Less(t, size, uintptr(64), "unsafe.Sizeof(wheel.Timer{})")
	assert.Less(t, perTimer, 64.0, "heap bytes per armed embedded timer")
	assert.GreaterOrEqual(t, perTimer, 0.9*float64(size), "the measurement must at least see the timers")
}

// benchFootprint returns the heap growth per item of what build returns,
// measured across garbage collections.
func benchFootprint(n int, build func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// BenchmarkTimer_Footprint reports the heap bytes per armed timer (metric
// B/timer) with 100k timers armed: impl=wheel with embedded timers, impl=stdlib
// with time.AfterFunc; all sharing one callback (callback=shared), or each
// with its own closure over its connection (callback=per-conn, the usual case,
// which costs a 16 B closure per timer). One op builds and measures one set.
func BenchmarkTimer_Footprint(b *testing.B) {
	const n = 100_000
	type conn struct {
		idle wheel.Timer
		hits int
	}
	cases := []struct {
		name  string
		build func(w *wheel.Wheel) any
	}{
		{name: "callback=shared/impl=wheel", build: func(w *wheel.Wheel) any {
			ts := make([]wheel.Timer, n)
			f := func() {}
			for i := range ts {
				ts[i].Init(w, f)
				ts[i].Reset(time.Hour)
			}
			return ts
		}},
		{name: "callback=shared/impl=stdlib", build: func(*wheel.Wheel) any {
			ts := make([]*time.Timer, n)
			f := func() {}
			for i := range ts {
				ts[i] = time.AfterFunc(time.Hour, f)
			}
			return ts
		}},
		{name: "callback=per-conn/impl=wheel", build: func(w *wheel.Wheel) any {
			cs := make([]conn, n)
			for i := range cs {
				c := &cs[i]
				c.idle.Init(w, func() { c.hits++ })
				c.idle.Reset(time.Hour)
			}
			return cs
		}},
		{name: "callback=per-conn/impl=stdlib", build: func(*wheel.Wheel) any {
			type stdConn struct {
				idle *time.Timer
				hits int
			}
			cs := make([]stdConn, n)
			ts := make([]*time.Timer, n)
			for i := range cs {
				c := &cs[i]
				c.idle = time.AfterFunc(time.Hour, func() { c.hits++ })
				ts[i] = c.idle
			}
			return ts
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name+"/timers=100000", func(b *testing.B) {
			var sum float64
			runs := 0
			for b.Loop() {
				w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
				var keep any
				sum += benchFootprint(n, func() any { keep = tc.build(w); return keep })
				runs++
				if ts, ok := keep.([]*time.Timer); ok {
					for _, t := range ts {
						t.Stop()
					}
				}
				w.Stop()
			}
			b.ReportMetric(sum/float64(runs), "B/timer")
		})
	}
}
