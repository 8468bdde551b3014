package retransmit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// benchTrackers preloads n trackers on a real-clock wheel, each with
// inflight messages outstanding (so its timer is armed), and returns them
// with the next seq of each.
func benchTrackers(b *testing.B, w *wheel.Wheel, n, inflight int) ([]retransmit.Tracker, []uint64) {
	b.Helper()
	trs := make([]retransmit.Tracker, n)
	next := make([]uint64, n)
	h := retransmit.Hooks{Retransmit: func(uint64, int) {}, GiveUp: func(error) {}}
	for i := range trs {
		if err := trs[i].Init(w, retransmit.Config{MaxRetransmits: 1 << 30, GiveUpAfter: time.Hour}, h); err != nil {
			b.Fatal(err)
		}
		for range inflight {
			if err := trs[i].Sent(next[i], w.Now()); err != nil {
				b.Fatal(err)
			}
			next[i]++
		}
		// One more message grows the ring to its working size.
		if err := trs[i].Sent(next[i], w.Now()); err != nil {
			b.Fatal(err)
		}
		trs[i].AckedThrough(next[i]-uint64(inflight), w.Now())
		next[i]++
	}
	return trs, next
}

// BenchmarkTracker_SentAckedThrough measures the per-message cost of the
// send and cumulative-ack paths: one Sent and one AckedThrough per
// iteration, round-robin over preloaded trackers. With inflight=0 every
// message starts and stops the timer; with inflight>0 every ack restarts it.
func BenchmarkTracker_SentAckedThrough(b *testing.B) {
	for _, n := range []int{1, 100000} {
		for _, inflight := range []int{0, 8} {
			b.Run(fmt.Sprintf("trackers=%d/inflight=%d", n, inflight), func(b *testing.B) {
				w := wheel.New()
				defer w.Stop()
				trs, next := benchTrackers(b, w, n, inflight)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					tr := &trs[i]
					now := w.Now()
					if err := tr.Sent(next[i], now); err != nil {
						b.Fatal(err)
					}
					tr.AckedThrough(next[i]-uint64(inflight), now)
					next[i]++
					if i++; i == n {
						i = 0
					}
				}
			})
		}
	}
}

// BenchmarkTracker_SentAcked is the selective-ack variant: each message is
// acknowledged individually, oldest first.
func BenchmarkTracker_SentAcked(b *testing.B) {
	for _, n := range []int{1, 100000} {
		b.Run(fmt.Sprintf("trackers=%d/inflight=8", n), func(b *testing.B) {
			w := wheel.New()
			defer w.Stop()
			trs, next := benchTrackers(b, w, n, 8)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tr := &trs[i]
				now := w.Now()
				if err := tr.Sent(next[i], now); err != nil {
					b.Fatal(err)
				}
				tr.Acked(next[i]-8, now)
				next[i]++
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}

// BenchmarkEstimator_Sample is the estimator update alone.
func BenchmarkEstimator_Sample(b *testing.B) {
	e, err := retransmit.NewEstimator(retransmit.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	rtt := 30 * time.Millisecond
	for b.Loop() {
		e.Sample(rtt)
		rtt ^= time.Millisecond
	}
}
