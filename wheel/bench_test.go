package wheel_test

// Benchmarks of the wheel side by side with the standard library's
// time.AfterFunc, on the paths a connection manager takes: the per-packet
// Reset (serial and parallel, on a few hot timers and on random ones among
// many), arm+stop churn of an embedded timer, and expiry throughput. Every
// benchmark preloads 100k or 1M timers armed for an hour, so the structures
// under test are as full as on a busy server.
//
// Compare the two implementations with
//
//	go test -run '^$' -bench . -benchtime=100ms -count=6 ./wheel/ > bench.txt
//	benchstat -col /impl bench.txt
//
// The idle-CPU benchmark is in bench_idle_test.go.

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// benchLong is the duration preloaded and reset timers are armed for: long
// enough that none fires during a run.
const benchLong = time.Hour

var benchSizes = []int{100_000, 1_000_000}

// benchSeqLen is the length of the precomputed random index sequence
// (a power of two, so the loop indexes it with a mask). At 1<<20 entries it is
// longer than any preloaded set here, so access=random touches the whole set.
const benchSeqLen = 1 << 20

// benchHot is how many timers access=hot cycles through.
const benchHot = 8

// benchTimers is a preloaded set of n timers of one implementation, all armed
// for benchLong. reset re-arms timer i for d. Only wheel or std is set.
type benchTimers struct {
	n     int
	w     *wheel.Wheel
	wt    []wheel.Timer // impl=wheel: embedded timers, one allocation
	std   []*time.Timer // impl=stdlib: one time.AfterFunc each
	fired *atomic.Int64 // callbacks that ran; a preloaded timer must not fire
	stdF  func()        // the stdlib callback
	seq   []uint32      // pseudo-random indexes into the set
}

// newBenchTimers preloads n timers of impl ("wheel" or "stdlib") and
// registers their teardown with b.Cleanup. The teardown fails the benchmark
// if any preloaded timer fired. The heap is collected before returning so
// that the garbage of the setup is not charged to the measured loop.
func newBenchTimers(b *testing.B, impl string, n int) *benchTimers {
	b.Helper()
	s := &benchTimers{n: n, fired: new(atomic.Int64)}
	fired := s.fired
	f := func() { fired.Add(1) }
	switch impl {
	case "wheel":
		s.w = wheel.New()
		s.wt = make([]wheel.Timer, n)
		for i := range s.wt {
			s.wt[i].Init(s.w, f)
			s.wt[i].Reset(benchLong)
		}
	case "stdlib":
		s.stdF = f
		s.std = make([]*time.Timer, n)
		for i := range s.std {
			s.std[i] = time.AfterFunc(benchLong, f)
		}
	default:
		b.Fatalf("unknown impl %q", impl)
	}
	b.Cleanup(func() {
		if s.w != nil {
			s.w.Stop()
		}
		for _, t := range s.std {
			t.Stop()
		}
		if got := fired.Load(); got != 0 {
			b.Errorf("%d preloaded timers fired during the run", got)
		}
	})
	s.seq = benchSeq(n, benchSeqLen, 1)
	if s.w != nil {
		settle(b, s.w, n)
	}
	runtime.GC()
	return s
}

// settle waits until the wheel's goroutine has taken in the preloaded
// timers (it counts them as it files them, within a second), so that a
// benchmark measures the steady state of timers the wheel holds.
func settle(b *testing.B, w *wheel.Wheel, pending int) {
	b.Helper()
	for deadline := time.Now().Add(5 * time.Second); w.Len() != pending; {
		if time.Now().After(deadline) {
			b.Fatalf("the wheel holds %d timers, want %d", w.Len(), pending)
		}
		time.Sleep(time.Millisecond)
	}
}

// benchSeq returns length pseudo-random indexes in [0, n), fixed by seed.
func benchSeq(n, length int, seed uint64) []uint32 {
	r := rand.New(rand.NewPCG(seed, 0x6e657477686565))
	seq := make([]uint32, length)
	for i := range seq {
		seq[i] = uint32(r.IntN(n))
	}
	return seq
}

// benchImpls runs fn as sub-benchmarks impl=wheel and impl=stdlib, each with
// every preloaded size.
func benchImpls(b *testing.B, fn func(b *testing.B, impl string, n int)) {
	for _, impl := range []string{"wheel", "stdlib"} {
		b.Run("impl="+impl, func(b *testing.B) {
			for _, n := range benchSizes {
				b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
					fn(b, impl, n)
				})
			}
		})
	}
}

// BenchmarkTimer_Reset measures the per-packet path: a pending timer re-armed
// for the same long duration. access=hot cycles through 8 timers that stay in
// cache; access=random re-arms a pseudo-random timer of the preloaded set, so
// a cache miss on the timer dominates.
func BenchmarkTimer_Reset(b *testing.B) {
	for _, access := range []string{"hot", "random"} {
		b.Run("access="+access, func(b *testing.B) {
			benchImpls(b, func(b *testing.B, impl string, n int) {
				s := newBenchTimers(b, impl, n)
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				i := 0
				switch {
				case impl == "wheel" && access == "hot":
					ts := s.wt[:benchHot]
					for b.Loop() {
						ts[i%benchHot].Reset(benchLong)
						i++
					}
				case impl == "wheel":
					ts, seq := s.wt, s.seq
					for b.Loop() {
						ts[seq[i&(benchSeqLen-1)]].Reset(benchLong)
						i++
					}
				case access == "hot":
					ts := s.std[:benchHot]
					for b.Loop() {
						ts[i%benchHot].Reset(benchLong)
						i++
					}
				default:
					ts, seq := s.std, s.seq
					for b.Loop() {
						ts[seq[i&(benchSeqLen-1)]].Reset(benchLong)
						i++
					}
				}
			})
		})
	}
}

// BenchmarkTimer_ResetFrom measures arming from an instant: from=now reads
// Now for every reset (what Reset costs), from=batch an instant an event
// loop reads once per batch of events (advanced by 101 ns per reset, so the
// deadline moves on as it would under traffic). Same access patterns as
// BenchmarkTimer_Reset.
func BenchmarkTimer_ResetFrom(b *testing.B) {
	for _, from := range []string{"now", "batch"} {
		for _, access := range []string{"hot", "random"} {
			b.Run("from="+from+"/access="+access, func(b *testing.B) {
				for _, n := range benchSizes {
					b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
						s := newBenchTimers(b, "wheel", n)
						b.ReportAllocs()
						defer reportCPU(b, nil)()
						ts, w := s.wt, s.w
						// hot: indexes 0-7 in turn; random: the preloaded sequence.
						seq := s.seq
						if access == "hot" {
							seq = make([]uint32, benchSeqLen)
							for j := range seq {
								seq[j] = uint32(j % benchHot)
							}
						}
						i := 0
						if from == "now" {
							for b.Loop() {
								ts[seq[i&(benchSeqLen-1)]].ResetFrom(w.Now(), benchLong)
								i++
							}
							return
						}
						now := w.Now()
						for b.Loop() {
							ts[seq[i&(benchSeqLen-1)]].ResetFrom(now, benchLong)
							now += 101
							i++
						}
					})
				}
			})
		}
	}
}

// BenchmarkClock_Now is the floor of Reset: one read of the monotonic clock
// as Wheel.Now makes it (time.Since of a time with a monotonic reading).
func BenchmarkClock_Now(b *testing.B) {
	start := time.Now()
	var sink time.Duration
	defer reportCPU(b, nil)()
	for b.Loop() {
		sink += time.Since(start)
	}
	runtime.KeepAlive(sink)
}

// BenchmarkTimer_ResetParallel is BenchmarkTimer_Reset from GOMAXPROCS
// goroutines at once, each re-arming timers of its own contiguous share of
// the preloaded set (no two goroutines touch the same timer, as with
// connections owned by different event loops).
func BenchmarkTimer_ResetParallel(b *testing.B) {
	for _, access := range []string{"hot", "random"} {
		b.Run("access="+access, func(b *testing.B) {
			benchImpls(b, func(b *testing.B, impl string, n int) {
				s := newBenchTimers(b, impl, n)
				procs := runtime.GOMAXPROCS(0) // RunParallel starts this many goroutines
				share := n / procs
				// One random sequence per goroutine, within its share.
				seqs := make([][]uint32, procs)
				for g := range seqs {
					seqs[g] = benchSeq(share, benchSeqLen, uint64(g)+2)
					for k := range seqs[g] {
						seqs[g][k] += uint32(g * share)
					}
				}
				var next atomic.Int64
				b.ReportAllocs()
				defer reportCPU(b, nil)()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					g := int(next.Add(1)-1) % procs
					lo := g * share
					seq := seqs[g]
					i := 0
					switch {
					case impl == "wheel" && access == "hot":
						ts := s.wt[lo : lo+benchHot]
						for pb.Next() {
							ts[i%benchHot].Reset(benchLong)
							i++
						}
					case impl == "wheel":
						ts := s.wt
						for pb.Next() {
							ts[seq[i&(benchSeqLen-1)]].Reset(benchLong)
							i++
						}
					case access == "hot":
						ts := s.std[lo : lo+benchHot]
						for pb.Next() {
							ts[i%benchHot].Reset(benchLong)
							i++
						}
					default:
						ts := s.std
						for pb.Next() {
							ts[seq[i&(benchSeqLen-1)]].Reset(benchLong)
							i++
						}
					}
				})
			})
		})
	}
}

// BenchmarkTimer_ArmStop measures churn: a preallocated timer, stopped, is
// armed and stopped again each iteration, as when a short-lived connection
// opens and closes. For the wheel it is an embedded Timer; for the standard
// library a *time.Timer made once by AfterFunc (so neither allocates per
// iteration).
func BenchmarkTimer_ArmStop(b *testing.B) {
	benchImpls(b, func(b *testing.B, impl string, n int) {
		s := newBenchTimers(b, impl, n)
		b.ReportAllocs()
		defer reportCPU(b, nil)()
		if impl == "wheel" {
			var t wheel.Timer
			t.Init(s.w, func() { s.fired.Add(1) })
			for b.Loop() {
				t.Reset(benchLong)
				t.Stop()
			}
			return
		}
		t := time.AfterFunc(benchLong, s.stdF)
		t.Stop()
		for b.Loop() {
			t.Reset(benchLong)
			t.Stop()
		}
	})
}

// Expiry batches: each iteration arms benchBatch timers for one common
// instant benchLead ahead and waits until all have fired.
const (
	benchBatch = 10_000
	benchLead  = 5 * time.Millisecond
	benchWait  = 10 * time.Second // a batch not done by then fails the run
)

// BenchmarkWheel_Expiry measures expiry throughput on the real clock, with
// 100k or 1M long timers preloaded as ballast. Each iteration (one op) arms
// benchBatch preallocated timers to fall due at one instant and waits until
// every callback has run. The metric ns/expiry is the time from the first
// callback of a batch to the last, divided by the expiries in between: how
// fast due timers are dispatched, with the arming and the wait for the
// deadline left out. ns/op, the whole batch, is dominated by benchLead.
//
// For the wheel the instant is a tick boundary computed from w.Now, so a
// batch lands in one bucket even if the tick advances while it is armed; for
// the standard library each timer is armed for the time left to the instant.
// Stdlib callbacks each run on a new goroutine, the wheel's on its own.
func BenchmarkWheel_Expiry(b *testing.B) {
	benchImpls(b, func(b *testing.B, impl string, n int) {
		s := newBenchTimers(b, impl, n)
		base := time.Now()
		var first, last atomic.Int64 // nanoseconds since base
		var count atomic.Int64
		done := make(chan struct{}, 1)
		cb := func() {
			if first.Load() == 0 {
				first.CompareAndSwap(0, int64(time.Since(base)))
			}
			if count.Add(1) == benchBatch {
				last.Store(int64(time.Since(base)))
				done <- struct{}{}
			}
		}
		var arm func()
		if impl == "wheel" {
			w := s.w
			ts := make([]wheel.Timer, benchBatch)
			for i := range ts {
				ts[i].Init(w, cb)
			}
			arm = func() {
				tick := w.Tick()
				at := (w.Now()+benchLead)/tick*tick + tick
				for i := range ts {
					ts[i].Reset(at - w.Now())
				}
			}
		} else {
			ts := make([]*time.Timer, benchBatch)
			for i := range ts {
				ts[i] = time.AfterFunc(benchLong, cb)
				ts[i].Stop()
			}
			arm = func() {
				at := time.Now().Add(benchLead)
				for _, t := range ts {
					t.Reset(time.Until(at))
				}
			}
		}
		timeout := time.NewTimer(benchWait)
		runtime.GC()
		var span time.Duration
		batches := 0
		b.ReportAllocs()
		defer reportCPU(b, nil)()
		for b.Loop() {
			first.Store(0)
			count.Store(0)
			timeout.Reset(benchWait)
			arm()
			select {
			case <-done:
			case <-timeout.C:
				b.Fatalf("only %d of %d timers fired within %v", count.Load(), benchBatch, benchWait)
			}
			span += time.Duration(last.Load() - first.Load())
			batches++
		}
		b.ReportMetric(float64(span.Nanoseconds())/float64(batches*(benchBatch-1)), "ns/expiry")
	})
}
