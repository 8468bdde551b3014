package idle_test

import (
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// benchConfig turns on every policy a per-packet call touches.
var benchConfig = only(idle.Config{
	IdleTimeout: 5 * time.Minute, ReadSilenceTimeout: 2 * time.Minute,
	KeepaliveTime: time.Minute, KeepaliveTimeout: 20 * time.Second,
	FrameTimeout: 30 * time.Second, HandshakeTimeout: 10 * time.Second,
	MaxAge: time.Hour, MaxAgeJitter: 5 * time.Minute, MaxAgeGrace: time.Minute,
	WriteStallTimeout: time.Minute,
})

func preload(tb testing.TB, w *wheel.Wheel, n int) []*idle.Tracker {
	tb.Helper()
	trs := make([]*idle.Tracker, n)
	for i := range trs {
		tr, err := idle.NewTracker(w, benchConfig, idle.Hooks{Close: func(idle.Reason) {}, Probe: func() {}})
		require.NoError(tb, err)
		trs[i] = tr
	}
	return trs
}

// benchNow stands for the time an event loop reads once per batch
// (Wheel.Now).
var benchNow = time.Duration(1)

var perPacketOps = []struct {
	name string
	f    func(*idle.Tracker)
}{
	{"Activity", (*idle.Tracker).Activity},
	{"BytesIn", (*idle.Tracker).BytesIn},
	{"Received", (*idle.Tracker).Received},
	// An event loop's time, new for every event: a store every call.
	{"ReceivedAt", func(t *idle.Tracker) { benchNow += 101; t.ReceivedAt(benchNow) }},
	{"Frame", func(t *idle.Tracker) { t.FrameStart(); t.FrameEnd() }},
	{"WrittenDrained", func(t *idle.Tracker) { t.Written(); t.Drained() }},
}

// BenchmarkTracker_PerPacket calls one per-packet operation per iteration,
// cycling through live trackers (all policies on); with 100k of them each
// call touches a tracker that is not in cache, as a busy server's does. One
// warm-up pass first reaches the steady state: the lazily armed frame and
// write timers are pending, so the measured calls do not touch the wheel.
// clock=real is a running wheel; clock=manual isolates the tracker's own
// cost from the wheel's clock read.
func BenchmarkTracker_PerPacket(b *testing.B) {
	for _, clock := range []string{"real", "manual"} {
		for _, n := range []int{1, 100000} {
			for _, op := range perPacketOps {
				b.Run(fmt.Sprintf("op=%s/clock=%s/trackers=%d", op.name, clock, n), func(b *testing.B) {
					var w *wheel.Wheel
					if clock == "manual" {
						w = wheel.New(wheel.WithClock(wheel.NewManualClock()))
					} else {
						w = wheel.New()
					}
					defer w.Stop()
					trs := preload(b, w, n)
					defer func() {
						for _, tr := range trs {
							tr.Stop()
						}
					}()
					for _, tr := range trs {
						op.f(tr)
					}
					runtime.GC()
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						op.f(trs[i])
						if i++; i == len(trs) {
							i = 0
						}
					}
				})
			}
		}
	}
}

// BenchmarkTracker_ReceivedParallel: every P marks bytes on its own share of
// 100k trackers.
func BenchmarkTracker_ReceivedParallel(b *testing.B) {
	w := wheel.New()
	defer w.Stop()
	trs := preload(b, w, 100000)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			trs[i].Received()
			i += 7
			if i >= len(trs) {
				i -= len(trs)
			}
		}
	})
	for _, tr := range trs {
		tr.Stop()
	}
}

// BenchmarkDeadline_PerRead compares the wrapper's per-Read bookkeeping with
// what it replaces: SetReadDeadline(time.Now().Add(d)) on a TCP conn before
// every Read. Neither reads bytes; this is the cost added to each Read.
func BenchmarkDeadline_PerRead(b *testing.B) {
	b.Run("impl=SetReadDeadline", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(b, err)
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(b, err)
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		}
	})
	b.Run("impl=idle", func(b *testing.B) {
		w := wheel.New()
		defer w.Stop()
		trs := preload(b, w, 1)
		b.ReportAllocs()
		for b.Loop() {
			trs[0].Received()
		}
		trs[0].Stop()
	})
}

// TestTracker_PerPacketAllocs asserts the per-packet calls allocate nothing.
func TestTracker_PerPacketAllocs(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	trs := preload(t, w, 64)
	for _, op := range perPacketOps {
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			op.f(trs[i%len(trs)])
			i++
			if i%len(trs) == 0 {
				clk.Advance(time.Millisecond) // cross ticks: new timestamps, re-arms
			}
		})
		assert.Zerof(t, allocs, "%s allocates", op.name)
	}
	for _, tr := range trs {
		tr.Stop()
	}
}
