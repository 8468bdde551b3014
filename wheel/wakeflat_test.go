package wheel_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// Connections active every connPeriod, each holding one idle timer of
// connIdle that its event loop resets with ResetFrom on every message: the
// pattern whose wake-ups must not grow with the connections.
const (
	connPeriod = 500 * time.Millisecond
	connIdle   = 3 * time.Second
)

// TestSimulated_ResetEveryMessageWakesFlat runs n connections on the
// simulated driver (simulateConns), each reset from the instant of its
// message: no timer may fire, and the driver may wake at most 25 times a
// simulated second, at 1000 connections as at 16000: a deadline moved
// later is only stored, and the driver meets it again only when its old
// slot on level 1 or above comes round (at most one per 64 ticks), where it
// files it straight to its new slot. Then the even connections go quiet:
// each must fire at the tick of its deadline (the sim steps where the
// driver plans), and the odd ones never.
func TestSimulated_ResetEveryMessageWakesFlat(t *testing.T) {
	for _, n := range []int{1000, 16000} {
		t.Run(fmt.Sprintf("conns=%d", n), func(t *testing.T) {
			var now int64
			w := newSim(t, &now)
			w.SetCanPrecise(true)
			timers := make([]wheel.Timer, n)
			firedAt := make([]int64, n)
			for i := range timers {
				firedAt[i] = -1
				timers[i].Init(w, func() { firedAt[i] = now })
			}
			simulateConns(t, w, &now, firedAt, func(i int) { timers[i].ResetFrom(w.Now(), connIdle) })
		})
	}
}

// simulateConns runs len(firedAt) connections on the simulated wheel w,
// stepping its driver where it plans to wake: each connection's message
// comes every connPeriod (phases spread over the period, messages at whole
// milliseconds, a loop's batch), for 20 s of simulated time, and message(i)
// handles it. Until then nothing may have fired (firedAt[i] is -1), and the
// driver may wake at most 25 times a simulated second. Then the even
// connections go quiet: each must fire (firedAt, set by the caller's
// callback) at its last message plus connIdle, and the odd ones never.
func simulateConns(t *testing.T, w *wheel.Wheel, now *int64, firedAt []int64, message func(i int)) {
	t.Helper()
	n := len(firedAt)
	last := make([]int64, n) // the instant of each connection's last message
	phase := func(i int) int64 { return int64(connPeriod) * int64(i) / int64(n) / ms * ms }
	const end = int64(20 * time.Second)
	wake := w.Step()
	steps := 0
	for at := int64(0); at <= end+int64(connIdle)+int64(connPeriod); at += ms {
		for wake <= at {
			*now = wake
			wake = w.Step()
			steps++
		}
		*now = at
		for i := range n {
			if (at-phase(i))%int64(connPeriod) != 0 || at < phase(i) || (at >= end && i%2 == 0) {
				continue
			}
			last[i] = at
			message(i)
		}
		if w.WakeRequested() {
			wake = w.Step()
			steps++
		}
		if at == end {
			for i, f := range firedAt {
				require.Equal(t, int64(-1), f, "connection %d, active every %v, fired", i, connPeriod)
			}
			// The first connIdle holds the first armings' slots.
			perSec := float64(steps) / (float64(end) / float64(time.Second))
			t.Logf("conns=%d wake-ups/s %.1f", n, perSec)
			assert.LessOrEqual(t, perSec, 25.0, "wake-ups a second at %d connections", n)
		}
	}
	for i, f := range firedAt {
		if i%2 == 1 {
			assert.Equal(t, int64(-1), f, "connection %d is still active", i)
			continue
		}
		assert.Equal(t, last[i]+int64(connIdle), f, "connection %d: at its deadline's tick", i)
	}
}

// BenchmarkWheel_WakeupsPerConn measures how often the wheel's goroutine
// wakes on the real clock for conns connections, each active every
// connPeriod (phases spread over it), whose idle timer of connIdle its
// event loop resets with ResetFrom from the instant it read for the batch;
// two loops, each reading the clock once a millisecond and resetting the
// timers of its connections whose message came. One op is a window of 5 s,
// after the first connIdle+1 s (the first armings); run it with
// -benchtime=1x. wakeups/s must stay flat in conns; fired/s counts timers
// that fired (none should: every connection is active).
//
//	go test -run '^$' -bench WakeupsPerConn -benchtime=1x -count=3 ./wheel/
func BenchmarkWheel_WakeupsPerConn(b *testing.B) {
	for _, n := range []int{1000, 8000, 16000} {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			const loops = 2
			w := wheel.New()
			defer w.Stop()
			var fired atomic.Int64
			timers := make([]wheel.Timer, n)
			for i := range timers {
				timers[i].Init(w, func() { fired.Add(1) })
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for l := range loops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tk := time.NewTicker(time.Millisecond)
					defer tk.Stop()
					next := make([]time.Duration, 0, n/loops) // each connection's next message
					for i := l; i < n; i += loops {
						next = append(next, connPeriod*time.Duration(i)/time.Duration(n))
					}
					for {
						select {
						case <-stop:
							return
						case <-tk.C:
						}
						now := w.Now()
						for k := range next {
							if next[k] <= now {
								timers[l+k*loops].ResetFrom(now, connIdle)
								next[k] += connPeriod
							}
						}
					}
				}()
			}
			defer func() { close(stop); wg.Wait() }()
			time.Sleep(connIdle + time.Second)
			var wakeups uint64
			var wall time.Duration
			f0 := fired.Load()
			for b.Loop() {
				w0, t0 := w.Wakeups(), time.Now()
				time.Sleep(5 * time.Second)
				wakeups += w.Wakeups() - w0
				wall += time.Since(t0)
			}
			b.ReportMetric(float64(wakeups)/wall.Seconds(), "wakeups/s")
			b.ReportMetric(float64(fired.Load()-f0)/wall.Seconds(), "fired/s")
			runtime.KeepAlive(timers)
		})
	}
}

// TestSimulated_TrackersWakeFlat is the same pattern through idle's
// trackers, as netserver runs them: each message only stamps the tracker
// (ReceivedAt), and the policy timer's callback re-arms for the deadline
// the stamps moved, once per idle period per connection. Those callbacks
// check on a shared grid, so the driver still wakes at most 25 times a
// simulated second, at 1000 connections as at 16000 (178 here, where the
// 500 phases a period are whole milliseconds, if each re-armed for its own
// deadline: one wake-up per distinct deadline). The even connections then
// go quiet, and each must close at the tick of its deadline: its last
// message plus the timeout.
func TestSimulated_TrackersWakeFlat(t *testing.T) {
	for _, n := range []int{1000, 16000} {
		t.Run(fmt.Sprintf("conns=%d", n), func(t *testing.T) {
			var now int64
			w := newSim(t, &now)
			w.SetCanPrecise(true)
			trackers := make([]*idle.Tracker, n)
			closedAt := make([]int64, n)
			for i := range closedAt {
				closedAt[i] = -1
			}
			simulateConns(t, w, &now, closedAt, func(i int) {
				if trackers[i] != nil {
					trackers[i].ReceivedAt(w.Now())
					return
				}
				tr, err := idle.NewTracker(w, only(idle.Config{IdleTimeout: connIdle}),
					idle.Hooks{Close: func(idle.Reason) { closedAt[i] = now }})
				require.NoError(t, err)
				trackers[i] = tr
			})
		})
	}
}
