package wheel_test

// Benchmarks of the kind a user would write: timers made by AfterFunc (one
// allocation each), reached through a table of pointers, one picked at
// random per operation, side by side with what the same access costs
// without a timer (impl=floor) and with the standard library's.
//
//	go test -run '^$' -bench 'Random|Burst' -count=10 ./wheel/ > random.txt
//	benchstat -col /impl random.txt

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/wheel"
)

// floorRecord is a record of a Timer's size, for impl=floor: what one store
// through the same kind of pointer table costs, cache misses included.
type floorRecord struct {
	word uint64
	_    [unsafe.Sizeof(wheel.Timer{}) - 8]byte
}

// floorCAS is floorRecord with an atomic word, for impl=floor-atomic and
// impl=floor-cas.
type floorCAS struct {
	word atomic.Uint64
	_    [unsafe.Sizeof(wheel.Timer{}) - 8]byte
}

// Every benchmark here first touches each record once the way the loop
// will, so that it measures the steady state of a server, whose timers are
// reset many times.

// BenchmarkTimer_ResetRandom re-arms a random one of 1 000 000 pending
// timers for the same long duration, through a table of pointers:
// impl=wheel with ResetFrom from an instant an event loop reads once per
// batch (advanced by 101 ns per reset), impl=wheel-reset with Reset, on
// timers from AfterFunc; impl=floor stores one word into a record of the
// same size instead, with a plain store, which no timer shared between
// goroutines may use; impl=floor-atomic stores it with sync/atomic, the
// least any update of a shared timer costs in Go (an atomic store is a
// locked exchange on amd64); impl=floor-cas loads that word and
// compare-and-swaps it, as a lock-free update that depends on the old
// value does; impl=floor-cas-call does the same in a method that is not
// inlined, as ResetFrom is not; impl=stdlib resets a time.AfterFunc timer.
func BenchmarkTimer_ResetRandom(b *testing.B) {
	const n = 1_000_000
	seq := benchSeq(n, benchSeqLen, 7)
	for _, impl := range []string{"wheel", "wheel-reset", "floor", "floor-atomic", "floor-cas", "floor-cas-call", "stdlib"} {
		b.Run(fmt.Sprintf("impl=%s/timers=%d", impl, n), func(b *testing.B) {
			i := 0
			switch impl {
			case "wheel", "wheel-reset":
				w := wheel.New()
				defer w.Stop()
				ts := make([]*wheel.Timer, n)
				for k := range ts {
					ts[k] = w.AfterFunc(benchLong, func() { b.Error("fired") })
				}
				now := w.Now()
				for _, t := range ts {
					t.ResetFrom(now, benchLong) // the steady state (see above)
				}
				settle(b, w, n)
				runtime.GC()
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				if impl == "wheel-reset" {
					for b.Loop() {
						ts[seq[i&(benchSeqLen-1)]].Reset(benchLong)
						i++
					}
					return
				}
				now = w.Now()
				for b.Loop() {
					ts[seq[i&(benchSeqLen-1)]].ResetFrom(now, benchLong)
					now += 101
					i++
				}
			case "floor":
				rs := make([]*floorRecord, n)
				for k := range rs {
					rs[k] = new(floorRecord)
					rs[k].word = 1
				}
				runtime.GC()
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				for b.Loop() {
					rs[seq[i&(benchSeqLen-1)]].word = uint64(i)
					i++
				}
			case "floor-atomic":
				rs := newFloorCAS(n)
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				for b.Loop() {
					rs[seq[i&(benchSeqLen-1)]].word.Store(uint64(i))
					i++
				}
			case "floor-cas":
				rs := newFloorCAS(n)
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				for b.Loop() {
					r := rs[seq[i&(benchSeqLen-1)]]
					r.word.CompareAndSwap(r.word.Load(), uint64(i))
					i++
				}
			case "floor-cas-call":
				rs := newFloorCAS(n)
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				for b.Loop() {
					rs[seq[i&(benchSeqLen-1)]].set(uint64(i))
					i++
				}
			case "stdlib":
				ts := make([]*time.Timer, n)
				for k := range ts {
					ts[k] = time.AfterFunc(benchLong, func() { b.Error("fired") })
				}
				defer func() {
					for _, t := range ts {
						t.Stop()
					}
				}()
				for _, t := range ts {
					t.Reset(benchLong)
				}
				runtime.GC()
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				for b.Loop() {
					ts[seq[i&(benchSeqLen-1)]].Reset(benchLong)
					i++
				}
			}
		})
	}
}

// newFloorCAS allocates n records for impl=floor-atomic and impl=floor-cas,
// each touched once, and collects the garbage of the setup.
func newFloorCAS(n int) []*floorCAS {
	rs := make([]*floorCAS, n)
	for k := range rs {
		rs[k] = new(floorCAS)
		rs[k].word.Store(1)
	}
	runtime.GC()
	return rs
}

// BenchmarkTimer_ArmCancelRandom arms a random one of 100 000 stopped
// timers for 200 ms and cancels it per op, as a connection's retransmit
// timer is armed on a send and cancelled on its ack, on one goroutine while
// the wheel's goroutine runs, beside 100 000 pending timers: impl=wheel
// arms timers from AfterFunc with ResetFrom from an instant read once per
// batch of 64 (as netserver's retransmit path does), impl=wheel-reset with Reset,
// impl=stdlib time.AfterFunc timers. impl=floor-cas is the floor: two
// compare-and-swaps on a random record of a Timer's size, the least a
// lock-free arm and cancel of a shared timer costs, with no pending timers
// beside them; the processor overlaps the cache misses of many iterations.
// impl=floor-cas-chain makes each record's index wait for the previous
// record's word, so that the misses are taken one at a time, as they are
// when much work that depends on the loaded word sits between the load and
// the compare-and-swap. Run it for 2 s (see docs/perf.md). cpu-ns/op is
// the process's CPU per op (see reportCPU).
func BenchmarkTimer_ArmCancelRandom(b *testing.B) {
	const benchRTO = 200 * time.Millisecond
	const n = 100_000
	seq := benchSeq(n, benchSeqLen, 8)
	for _, impl := range []string{"wheel", "wheel-reset", "floor-cas", "floor-cas-chain", "stdlib"} {
		b.Run(fmt.Sprintf("impl=%s/timers=%d", impl, n), func(b *testing.B) {
			i := 0
			if impl == "floor-cas-chain" {
				rs := newFloorCAS(n)
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				var last uint64
				for b.Loop() {
					// The next record's index waits for this one's word
					// (last>>63 is always 0), so no two misses overlap.
					r := rs[seq[(i+int(last>>63))&(benchSeqLen-1)]]
					r.word.CompareAndSwap(r.word.Load(), 2) // armed
					last = r.word.Load()
					r.word.CompareAndSwap(last, 1) // cancelled
					i++
				}
				return
			}
			if impl == "floor-cas" {
				rs := newFloorCAS(n)
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				for b.Loop() {
					r := rs[seq[i&(benchSeqLen-1)]]
					r.word.CompareAndSwap(r.word.Load(), 2) // armed
					r.word.CompareAndSwap(r.word.Load(), 1) // cancelled
					i++
				}
				return
			}
			s := newBenchTimers(b, strings.TrimSuffix(impl, "-reset"), n) // the pending ones
			if s.w != nil {
				ts := make([]*wheel.Timer, n)
				for k := range ts {
					ts[k] = s.w.AfterFunc(benchRTO, func() { b.Error("fired") })
					ts[k].Stop()
				}
				for _, t := range ts {
					t.Reset(benchRTO) // the steady state (see above)
					t.Stop()
				}
				settle(b, s.w, n)
				// The wheel takes the setup's armings and stops in, and then
				// one take finds nothing: the loop starts on a quiet wheel.
				time.Sleep(2*wheel.ReleaseDelay + 100*time.Millisecond)
				runtime.GC()
				b.ReportAllocs()
				defer reportCPU(b, s.w)()
				if impl == "wheel-reset" {
					for b.Loop() {
						t := ts[seq[i&(benchSeqLen-1)]]
						t.Reset(benchRTO)
						t.Stop()
						i++
					}
					return
				}
				var now time.Duration
				for b.Loop() {
					if i%64 == 0 { // a batch of 64 events per clock read
						now = s.w.Now()
					}
					t := ts[seq[i&(benchSeqLen-1)]]
					t.ResetFrom(now, benchRTO)
					t.Stop()
					i++
				}
				return
			}
			ts := make([]*time.Timer, n)
			for k := range ts {
				ts[k] = time.AfterFunc(benchRTO, func() { b.Error("fired") })
				ts[k].Stop()
			}
			for _, t := range ts {
				t.Reset(benchRTO)
				t.Stop()
			}
			runtime.GC()
			b.ReportAllocs()
			defer reportCPU(b, nil)()
			for b.Loop() {
				t := ts[seq[i&(benchSeqLen-1)]]
				t.Reset(benchRTO)
				t.Stop()
				i++
			}
		})
	}
}

// reportCPU starts measuring the process's CPU time and, for a wheel, its
// wake-ups; the function it returns reports them as cpu-ns/op (the CPU of
// every thread, the wheel's goroutine and the runtime's timers included,
// and unlike ns/op not inflated by other processes on a busy machine) and
// wakeups/s.
func reportCPU(b *testing.B, w *wheel.Wheel) func() {
	c0, t0 := benchProcessCPU(b), time.Now()
	var w0 uint64
	if w != nil {
		w0 = w.Wakeups()
	}
	return func() {
		b.ReportMetric(float64(benchProcessCPU(b)-c0)/float64(b.N), "cpu-ns/op")
		if w != nil {
			b.ReportMetric(float64(w.Wakeups()-w0)/time.Since(t0).Seconds(), "wakeups/s")
		}
	}
}

// BenchmarkWheel_BurstLateness arms 100 000 timers in a burst, with
// deadlines spread uniformly over 2 s, and reports how late they fire
// (p50-late-ms, p99-late-ms: the callback's Now minus the deadline
// computed from Now read just before arming). impl=wheel arms with
// AfterFunc; impl=stdlib with time.AfterFunc, measured the same way. One op
// is one burst (about 2 s); run it with -benchtime=1x.
func BenchmarkWheel_BurstLateness(b *testing.B) {
	for _, impl := range []string{"wheel", "stdlib"} {
		b.Run("impl="+impl+"/timers=100000", func(b *testing.B) {
			var p50, p99 time.Duration
			runs := 0
			for b.Loop() {
				late := burstLateness(b, impl, 100_000, 2*time.Second)
				p50 += late[len(late)/2]
				p99 += late[len(late)*99/100]
				runs++
			}
			b.ReportMetric(float64(p50)/float64(runs)/float64(time.Millisecond), "p50-late-ms")
			b.ReportMetric(float64(p99)/float64(runs)/float64(time.Millisecond), "p99-late-ms")
		})
	}
}

// burstLateness arms n timers at once, due uniformly over span, on a new
// 1 ms wheel (impl=wheel) or the runtime's timers (impl=stdlib), waits for
// them all, and returns their lateness, sorted.
func burstLateness(tb testing.TB, impl string, n int, span time.Duration) []time.Duration {
	w := wheel.New()
	defer w.Stop()
	late := make([]time.Duration, n)
	var left atomic.Int64
	left.Store(int64(n))
	done := make(chan struct{})
	seq := benchSeq(int(span/time.Microsecond), n, 11)
	for k := range n {
		d := time.Duration(seq[k]) * time.Microsecond
		due := w.Now() + d
		f := func() {
			late[k] = w.Now() - due
			if left.Add(-1) == 0 {
				close(done)
			}
		}
		if impl == "wheel" {
			w.AfterFunc(d, f)
		} else {
			time.AfterFunc(d, f)
		}
	}
	select {
	case <-done:
	case <-time.After(span + 30*time.Second):
		tb.Fatalf("%d of %d timers never fired", left.Load(), n)
	}
	slices.Sort(late)
	return late
}

// TestWheel_BurstNeverEarly arms 100 000 timers with AfterFunc in a burst,
// due uniformly over 2 s, on a 1 ms wheel's real clock, and checks that
// every one fires, none before its deadline, and at p99 no later than a
// tick and 5 ms plus twice what the process was kept waiting (lagmeter): a
// lost wake-up or a sleep to the release delay is later than that. How late
// on a quiet machine is BenchmarkWheel_BurstLateness's to measure.
func TestWheel_BurstNeverEarly(t *testing.T) {
	lag := lagmeter.New(t)
	late := burstLateness(t, "wheel", 100_000, 2*time.Second)
	require.GreaterOrEqual(t, late[0], time.Duration(0), "a timer fired early")
	p99 := late[len(late)*99/100]
	require.LessOrEqual(t, p99, lag.Slack(wheel.DefaultTick+5*time.Millisecond),
		"p99 lateness; the process was kept waiting %v", lag.Stalled())
}

// set stores v in r's word with a load and a compare-and-swap, and reports
// whether it held v already: impl=floor-cas-call's update, not inlined.
//
//go:noinline
func (r *floorCAS) set(v uint64) bool {
	for {
		old := r.word.Load()
		if old == v {
			return true
		}
		if r.word.CompareAndSwap(old, v) {
			return false
		}
	}
}
