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

// never is what Step returns when nothing is pending, and a peer's next
// event when it has none.
const never = int64(math.MaxInt64)

// TestSimulated_KeepaliveArmsFromExactInstants drives idle's keepalive
// policy on the simulated wheel (only this package's tests can build one,
// hence a policy test here): a connection stamped from exact instants, as
// netserver stamps them, goes silent, is probed twice and closed. The
// driver wakes at whole ticks, each deadline is met at its tick, none
// early, and the driver wakes only for the policy timer, never per tick.
func TestSimulated_KeepaliveArmsFromExactInstants(t *testing.T) {
	const (
		ms      = int64(time.Millisecond)
		kaTime  = 100 * ms
		kaWait  = 50 * ms
		kaCount = 2
	)
	now := 2*int64(time.Second) + ms/3 // past the first second's activity
	w := newSim(t, &now)
	require.Equal(t, never, w.Step(), "nothing pending: sleep")

	var probes []int64
	var closedAt int64 = -1
	var reason idle.Reason
	opened := now
	tr := new(idle.Tracker)
	err := tr.Init(w, time.Duration(opened), only(idle.Config{
		KeepaliveTime: time.Duration(kaTime), KeepaliveTimeout: time.Duration(kaWait), KeepaliveCount: kaCount,
	}), idle.Hooks{
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
		if closedAt >= 0 {
			break
		}
		require.Less(t, wakeAt, never, "step %d: the policy timer is pending", steps)
		require.Zero(t, wakeAt%ms, "step %d at %v: a wake-up at %v is not at a whole tick",
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
	// late), never before it.
	due := []int64{opened + kaTime, probes[0] + kaWait, probes[1] + kaWait}
	got := []int64{probes[0], probes[1], closedAt}
	for i := range due {
		assert.GreaterOrEqual(t, got[i], due[i], "event %d early", i)
		assert.Less(t, got[i], due[i]+ms+ms/3, "event %d more than a tick late", i)
	}
}

// TestSimulated_KeepaliveAnswerInTheProbesTick answers a probe within the
// tick of the probe, while the driver is late: the next probe is due
// KeepaliveTime after the answer, not after the probe.
func TestSimulated_KeepaliveAnswerInTheProbesTick(t *testing.T) {
	const (
		ms = int64(time.Millisecond)
		ka = 10 * ms
	)
	now := 2*int64(time.Second) + ms/3
	w := newSim(t, &now)
	w.AfterFunc(time.Hour, func() {})
	var probes []int64
	tr, err := idle.NewTracker(w, only(idle.Config{
		KeepaliveTime: time.Duration(ka), KeepaliveTimeout: time.Duration(ka), KeepaliveCount: 3,
	}), idle.Hooks{
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
			// The answer comes 0.2 ms after the probe, with the driver
			// late.
			now += 2 * ms / 10
			require.Equal(t, time.Duration(now), w.Now())
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
// armings land after their deadline) and peers whose bytes arrive at random instants,
// stamped with the call that reads the clock or from an instant, often right
// after a probe. It checks the policy's promises against the real
// (simulated) instants: a probe comes at least KeepaliveTime after the
// peer's last byte, one that follows an unanswered probe at least
// KeepaliveTimeout after it, and a close only after KeepaliveCount
// unanswered probes, KeepaliveTimeout after the last; every silent peer is
// closed. TestSimulated_PolicyNeverEarly does the same with every policy
// at once, each tracker configured with a random set of them.
func TestSimulated_KeepaliveNeverEarly(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { simulatePolicies(t, seed, false) })
	}
}

func TestSimulated_PolicyNeverEarly(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { simulatePolicies(t, seed, true) })
	}
}

// simPeer is one simulated connection: its tracker, its configuration, and
// the real (simulated) instants of what happened on it.
type simPeer struct {
	tr  *idle.Tracker
	cfg idle.Config
	rng *rand.Rand // for its hooks, which run in whatever order the wheel fires them

	opened, silentFrom int64 // nothing happens on it after silentFrom
	next               int64 // its next event; never: none
	lastIn, lastAct    int64 // the last byte, the last activity
	frameAt, writeAt   int64 // the frame, the output in flight since; -1: none
	handshakeDone      bool
	goneAwayAt         int64 // when GoAway was called; -1: not yet
	lastProbe          int64
	unanswered         int // probes since the last byte
	probes             int
	closed             bool
}

func simulatePolicies(t *testing.T, seed uint64, all bool) {
	const (
		ms      = int64(time.Millisecond)
		maxLate = 5 * ms
	)
	rng := rand.New(rand.NewPCG(seed, 7))
	now := 2*int64(time.Second) + rng.Int64N(ms)
	w := newSim(t, &now)
	start := now
	durations := []time.Duration{2 * time.Millisecond, 3500 * time.Microsecond, 10 * time.Millisecond}
	dur := func() time.Duration { return durations[rng.IntN(len(durations))] }
	// stamped calls the call that reads the clock (the one without At, however
	// late the driver) or the exact time, at random.
	stamped := func(reads func(), exact func(time.Duration)) {
		if rng.IntN(2) == 0 {
			reads()
		} else {
			exact(w.Now())
		}
	}
	gap := func(p *simPeer) int64 {
		mean := int64(5 * time.Millisecond)
		if p.cfg.KeepaliveTime > 0 {
			mean = int64(p.cfg.KeepaliveTime)
		}
		return rng.Int64N(2 * mean)
	}

	peers := make([]*simPeer, 24)
	for i := range peers {
		p := &simPeer{opened: now, silentFrom: start + rng.Int64N(300*ms), lastIn: now, lastAct: now,
			frameAt: -1, writeAt: -1, goneAwayAt: -1, lastProbe: -1, rng: rand.New(rand.NewPCG(seed, 100+uint64(i)))}
		cfg := &p.cfg
		if !all || rng.IntN(2) == 0 {
			cfg.KeepaliveTime, cfg.KeepaliveTimeout, cfg.KeepaliveCount = dur(), dur(), 1+rng.IntN(3)
		}
		if all {
			on := func() bool { return rng.IntN(3) == 0 }
			if on() {
				cfg.IdleTimeout = dur() + dur()
			}
			if on() {
				cfg.ReadSilenceTimeout = cfg.KeepaliveTime + dur()
			}
			if on() {
				cfg.FrameTimeout = dur()
			}
			if on() {
				cfg.WriteStallTimeout = dur()
			}
			if on() {
				cfg.HandshakeTimeout = dur() + dur()
			}
			if on() {
				cfg.MaxAge = 200*time.Millisecond + time.Duration(rng.Int64N(200*ms))
				if on() {
					cfg.MaxAgeGrace = dur()
				}
			}
			if cfg.KeepaliveTime == 0 && cfg.IdleTimeout == 0 && cfg.ReadSilenceTimeout == 0 && cfg.MaxAge == 0 {
				cfg.IdleTimeout = dur() // something must close a silent peer
			}
		}
		at := func() time.Duration { return time.Duration(now - p.opened) }
		hooks := idle.Hooks{
			Probe: func() {
				require.False(t, p.closed)
				require.NotZero(t, cfg.KeepaliveTime)
				require.GreaterOrEqual(t, now-p.lastIn, int64(cfg.KeepaliveTime), "peer %d at %v: probe %v after its last byte, %+v",
					i, at(), time.Duration(now-p.lastIn), *cfg)
				if p.unanswered > 0 {
					require.GreaterOrEqual(t, now-p.lastProbe, int64(cfg.KeepaliveTimeout), "peer %d at %v: probe %v after an unanswered one, %+v",
						i, at(), time.Duration(now-p.lastProbe), *cfg)
				}
				p.lastProbe = now
				p.unanswered++
				p.probes++
				if now < p.silentFrom && p.rng.IntN(4) != 0 {
					// Answer, often within the probe's tick.
					p.next = min(p.next, now+p.rng.Int64N(2*int64(cfg.KeepaliveTimeout)))
				}
			},
			GoAway: func() {
				require.Equal(t, int64(-1), p.goneAwayAt, "peer %d: a second GoAway", i)
				require.GreaterOrEqual(t, now-p.opened, int64(cfg.MaxAge), "peer %d: told to go away early, %+v", i, *cfg)
				p.goneAwayAt = now
			},
			Close: func(r idle.Reason) {
				require.False(t, p.closed)
				p.closed = true
				since := func(what string, from int64, d time.Duration) {
					require.NotZero(t, d, "peer %d at %v: closed for %v, not configured", i, at(), r)
					require.GreaterOrEqual(t, from, int64(0), "peer %d at %v: closed for %v with no %s in flight", i, at(), r, what)
					require.GreaterOrEqual(t, now-from, int64(d), "peer %d at %v: closed for %v %v after the %s, %+v",
						i, at(), r, time.Duration(now-from), what, *cfg)
				}
				switch r {
				case idle.ReasonIdle:
					since("last activity", p.lastAct, cfg.IdleTimeout)
				case idle.ReasonDeadPeer:
					since("last byte", p.lastIn, cfg.ReadSilenceTimeout)
				case idle.ReasonKeepalive:
					require.Equal(t, max(cfg.KeepaliveCount, 1), p.unanswered, "peer %d: closed after %d unanswered probes", i, p.unanswered)
					since("last probe", p.lastProbe, cfg.KeepaliveTimeout)
				case idle.ReasonFrameDeadline:
					since("frame", p.frameAt, cfg.FrameTimeout)
				case idle.ReasonWriteStall:
					since("output", p.writeAt, cfg.WriteStallTimeout)
				case idle.ReasonHandshake:
					require.False(t, p.handshakeDone, "peer %d: closed for a finished handshake", i)
					since("open", p.opened, cfg.HandshakeTimeout)
				case idle.ReasonMaxAge:
					since("open", p.opened, cfg.MaxAge+cfg.MaxAgeGrace)
				default:
					require.Fail(t, "unexpected reason", "peer %d: %v", i, r)
				}
			},
		}
		var err error
		if rng.IntN(2) == 0 {
			p.tr, err = idle.NewTracker(w, only(*cfg), hooks)
		} else {
			p.tr = new(idle.Tracker)
			err = p.tr.Init(w, w.Now(), only(*cfg), hooks)
		}
		require.NoError(t, err, "%+v", *cfg)
		p.next = now + gap(p)
		peers[i] = p
	}

	// span begins (again) or ends, at random, something with a deadline
	// timeout after its beginning: a frame or queued output. *since is when
	// it began, -1 when none is in flight.
	span := func(since *int64, timeout time.Duration, begin func(), beginAt func(time.Duration), end func()) {
		if *since >= 0 && rng.IntN(2) == 0 {
			end()
			*since = -1
			return
		}
		stamped(begin, beginAt)
		if *since < 0 && timeout > 0 {
			*since = now
		}
	}
	// event makes one random thing happen on p now.
	event := func(p *simPeer) {
		tr := p.tr
		switch k := rng.IntN(8); {
		case k < 3: // a byte (an answer, if a probe is out)
			if rng.IntN(2) == 0 {
				stamped(tr.Received, tr.ReceivedAt)
				p.lastAct = now
			} else {
				stamped(tr.BytesIn, tr.BytesInAt)
			}
			p.lastIn, p.unanswered = now, 0
		case k == 3:
			stamped(tr.Activity, tr.ActivityAt)
			p.lastAct = now
		case k == 4: // part of a frame, or its end
			span(&p.frameAt, p.cfg.FrameTimeout, tr.FrameStart, tr.FrameStartAt, tr.FrameEnd)
		case k == 5: // output queued, or drained
			span(&p.writeAt, p.cfg.WriteStallTimeout, tr.Written, tr.WrittenAt, tr.Drained)
		case k == 6:
			tr.HandshakeDone()
			p.handshakeDone = true
		default: // nothing this time
		}
	}

	driverAt := w.Step()
	for steps := 0; ; steps++ {
		require.Less(t, steps, 1_000_000)
		var next *simPeer
		for _, p := range peers {
			if !p.closed && p.next != never && (next == nil || p.next < next.next) {
				next = p
			}
		}
		if next != nil && next.next < driverAt {
			p := next
			now = max(now, p.next)
			event(p)
			p.next = never
			if now < p.silentFrom {
				p.next = now + gap(p)
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
		// A silent peer is closed: every peer has keepalive, idle, read
		// silence or max age, each of which ends in a close once nothing
		// happens.
		assert.True(t, p.closed, "peer %d: silent since %v, never closed, %+v", i, time.Duration(p.silentFrom-start), p.cfg)
		probes += p.probes
	}
	require.Greater(t, probes, 0, "the peers must be probed")
}

// only returns c with every timeout it leaves zero turned off (idle.Off):
// the simulation's model reads a zero setting as off.
func only(c idle.Config) idle.Config {
	for _, p := range []*time.Duration{&c.IdleTimeout, &c.ReadSilenceTimeout, &c.KeepaliveTime,
		&c.KeepaliveTimeout, &c.FrameTimeout, &c.HandshakeTimeout, &c.MaxAge, &c.WriteStallTimeout} {
		if *p == 0 {
			*p = idle.Off
		}
	}
	return c
}
