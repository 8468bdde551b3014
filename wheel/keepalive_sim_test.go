package wheel_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
)

// TestSimulated_KeepaliveArmsFromExactInstants drives idle's keepalive
// policy on the simulated wheel (only this package's tests can build one,
// hence a policy test here): a connection stamped from exact instants, as
// netserver stamps them, goes silent, is probed twice and closed. Its probes
// are stamped with the coarse clock, which answers are compared with, but
// their timeouts are armed from the exact time: every slot the policy fills
// holds exact timers only, so the driver wakes at whole ticks, without the
// quarter tick of slack (or any hold-back) a coarse arming needs, and each
// deadline is met at its tick, none early. Nothing reads the coarse clock
// off the wheel's goroutine, so the clock stays stale and the driver wakes
// only for the policy timer, never per tick.
func TestSimulated_KeepaliveArmsFromExactInstants(t *testing.T) {
	const (
		ms      = int64(time.Millisecond)
		kaTime  = 100 * ms
		kaWait  = 50 * ms
		kaCount = 2
		never   = int64(math.MaxInt64)
	)
	now := 2*int64(time.Second) + ms/3 // past the first second's activity
	w := newSim(t, &now)
	require.Equal(t, never, w.Step(), "nothing pending, nothing read: sleep")
	require.True(t, w.Stale())

	var probes []int64
	var closedAt int64 = -1
	var reason idle.Reason
	opened := now
	tr, err := idle.NewAt(w, time.Duration(opened), idle.Config{
		KeepaliveTime: time.Duration(kaTime), KeepaliveTimeout: time.Duration(kaWait), KeepaliveCount: kaCount,
	}, idle.Hooks{
		Close: func(r idle.Reason) { closedAt, reason = now, r },
		Probe: func() { probes = append(probes, now) },
	})
	require.NoError(t, err)

	// Drive the wheel as its goroutine would: wake when Step asks, each time
	// a third of a millisecond past the instant asked for.
	steps := 0
	for closedAt < 0 {
		wakeAt := w.Step()
		steps++
		require.True(t, w.Stale(), "step %d at %v: nothing reads the coarse clock, so it is not kept", steps, time.Duration(now))
		if closedAt >= 0 {
			require.Equal(t, never, wakeAt, "closed: nothing pending")
			break
		}
		require.Less(t, wakeAt, never, "step %d: the policy timer is pending", steps)
		require.Zero(t, wakeAt%ms, "step %d at %v: a wake-up at %v is not at a whole tick: a slot holds a coarse timer",
			steps, time.Duration(now), time.Duration(wakeAt))
		require.Less(t, steps, 20, "the driver wakes for the policy timer only, not every tick")
		now = max(now, wakeAt) + ms/3
	}
	assert.Equal(t, idle.ReasonKeepalive, reason)
	require.Len(t, probes, kaCount)
	closeDue, ok := tr.Due()
	require.True(t, ok)
	assert.Equal(t, time.Duration(probes[kaCount-1]+kaWait), closeDue, "the deadline runs from the last probe's exact time")
	// Each probe and the close come at the first tick at or after their
	// deadline (plus the third of a millisecond by which this driver wakes
	// late), never before it. (With the probes' timeouts armed from the
	// coarse clock, the second probe and the close came a quarter tick
	// later still.)
	due := []int64{opened + kaTime, probes[0] + kaWait, probes[1] + kaWait}
	got := []int64{probes[0], probes[1], closedAt}
	for i := range due {
		assert.GreaterOrEqual(t, got[i], due[i], "event %d early", i)
		assert.Less(t, got[i], due[i]+ms+ms/3, "event %d more than a tick late", i)
	}
}

// TestSimulated_KeepaliveAnswerInTheProbesTick answers a probe, with a coarse
// stamp, while the tick the probe was stamped with is still on the clock
// (the driver is late):
// the answer carries the probe's stamp but came after it, so the next probe
// is due KeepaliveTime after the answer, and the firing of a timer armed
// from the probe's exact time proves nothing about it. The wheel keeps its
// clock here (a coarse timer is pending), as it does for code that stamps
// from Now.
func TestSimulated_KeepaliveAnswerInTheProbesTick(t *testing.T) {
	const (
		ms = int64(time.Millisecond)
		ka = 10 * ms
	)
	now := 2*int64(time.Second) + ms/3
	w := newSim(t, &now)
	w.AfterFunc(time.Hour, func() {}) // a coarse arming: the driver keeps the clock
	var probes []int64
	tr, err := idle.New(w, idle.Config{
		KeepaliveTime: time.Duration(ka), KeepaliveTimeout: time.Duration(ka), KeepaliveCount: 3,
	}, idle.Hooks{
		Close: func(r idle.Reason) { t.Errorf("closed (%v): the peer answered", r) },
		Probe: func() { probes = append(probes, now) },
	})
	require.NoError(t, err)
	defer tr.Stop()

	var answered int64 = -1
	for steps := 0; len(probes) < 2; steps++ {
		require.Less(t, steps, 200)
		wakeAt := w.Step()
		if len(probes) == 1 && answered < 0 {
			// The answer comes 1.2 ms after the probe, with the driver
			// late: the probe's tick is still on the clock, so the answer
			// gets the probe's stamp.
			now += 12 * ms / 10
			require.Equal(t, time.Duration(probes[0]/ms*ms), w.Now(), "still the probe's tick")
			tr.BytesIn()
			answered = now
			continue
		}
		now = max(now, wakeAt) + ms/3
	}
	assert.GreaterOrEqual(t, probes[1]-answered, ka, "second probe %v after the answer, KeepaliveTime is %v",
		time.Duration(probes[1]-answered), time.Duration(ka))
	assert.Less(t, probes[1]-answered, ka+3*ms, "second probe late")
}

// TestSimulated_KeepaliveNeverEarly drives the keepalive policy of many
// trackers on the simulated wheel, with a driver that is sometimes late (so
// the coarse clock lags) and peers whose bytes arrive at random instants,
// stamped from the coarse clock or the exact one at random, often right
// after a probe. It checks the policy's promises against the real
// (simulated) instants: a probe comes at least KeepaliveTime after the
// peer's last byte, one that follows an unanswered probe at least
// KeepaliveTimeout after it, and a close only after KeepaliveCount
// unanswered probes, KeepaliveTimeout after the last; every silent peer is
// closed.
func TestSimulated_KeepaliveNeverEarly(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { simulateKeepalive(t, seed) })
	}
}

func simulateKeepalive(t *testing.T, seed uint64) {
	const (
		ms      = int64(time.Millisecond)
		never   = int64(math.MaxInt64)
		maxLate = 5 * ms
	)
	rng := rand.New(rand.NewPCG(seed, 7))
	now := 2*int64(time.Second) + rng.Int64N(ms)
	w := newSim(t, &now)
	start := now
	durations := []int64{2 * ms, 3*ms + ms/2, 10 * ms}

	type peer struct {
		tr            *idle.Tracker
		ka, wait      int64
		count         int
		silentFrom    int64 // no byte after this instant
		nextByte      int64 // never: none scheduled
		lastIn        int64 // the instant of the last byte (or the open)
		lastProbe     int64
		unanswered    int // probes since the last byte
		probes, bytes int
		closed        bool
	}
	peers := make([]*peer, 24)
	for i := range peers {
		p := &peer{
			ka:         durations[rng.IntN(len(durations))],
			wait:       durations[rng.IntN(len(durations))],
			count:      1 + rng.IntN(3),
			silentFrom: start + rng.Int64N(300*ms),
			lastIn:     now,
			lastProbe:  -1,
		}
		p.nextByte = now + rng.Int64N(2*p.ka)
		cfg := idle.Config{KeepaliveTime: time.Duration(p.ka), KeepaliveTimeout: time.Duration(p.wait), KeepaliveCount: p.count}
		hooks := idle.Hooks{
			Probe: func() {
				require.False(t, p.closed)
				require.GreaterOrEqual(t, now-p.lastIn, p.ka, "peer %d: probe %v after its last byte, KeepaliveTime %v",
					i, time.Duration(now-p.lastIn), time.Duration(p.ka))
				if p.unanswered > 0 {
					require.GreaterOrEqual(t, now-p.lastProbe, p.wait, "peer %d: probe %v after an unanswered one, KeepaliveTimeout %v",
						i, time.Duration(now-p.lastProbe), time.Duration(p.wait))
				}
				p.lastProbe = now
				p.unanswered++
				p.probes++
				if now < p.silentFrom && rng.IntN(4) != 0 {
					// Answer, often within the probe's tick.
					p.nextByte = min(p.nextByte, now+rng.Int64N(2*p.wait))
				}
			},
			Close: func(r idle.Reason) {
				require.Equal(t, idle.ReasonKeepalive, r, "peer %d", i)
				require.False(t, p.closed)
				require.Equal(t, p.count, p.unanswered, "peer %d: closed after %d unanswered probes", i, p.unanswered)
				require.GreaterOrEqual(t, now-p.lastProbe, p.wait, "peer %d: closed %v after its last probe, KeepaliveTimeout %v",
					i, time.Duration(now-p.lastProbe), time.Duration(p.wait))
				p.closed = true
			},
		}
		var err error
		if rng.IntN(2) == 0 {
			p.tr, err = idle.New(w, cfg, hooks)
		} else {
			p.tr, err = idle.NewAt(w, w.Elapsed(), cfg, hooks)
		}
		require.NoError(t, err)
		peers[i] = p
	}

	driverAt := w.Step()
	for steps := 0; ; steps++ {
		require.Less(t, steps, 1_000_000)
		next := (*peer)(nil)
		for _, p := range peers {
			if !p.closed && p.nextByte != never && (next == nil || p.nextByte < next.nextByte) {
				next = p
			}
		}
		if next != nil && next.nextByte < driverAt {
			p := next
			now = max(now, p.nextByte)
			if rng.IntN(2) == 0 {
				p.tr.BytesIn() // the coarse clock, however late the driver
			} else {
				p.tr.BytesInAt(w.Elapsed())
			}
			p.lastIn, p.unanswered = now, 0
			p.bytes++
			p.nextByte = never
			if now < p.silentFrom {
				p.nextByte = now + rng.Int64N(2*p.ka)
			}
			continue
		}
		if driverAt == never {
			break
		}
		now = max(now, driverAt)
		driverAt = w.Step()
		if driverAt != never && rng.IntN(5) == 0 {
			driverAt += rng.Int64N(maxLate)
		}
	}
	probes := 0
	for i, p := range peers {
		assert.True(t, p.closed, "peer %d: silent since %v, never closed", i, time.Duration(p.silentFrom-start))
		probes += p.probes
	}
	require.Greater(t, probes, len(peers), "the peers must be probed")
}
