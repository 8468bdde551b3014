package idle_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// TestSimulated_KeepaliveNeverEarly drives the keepalive policy of many
// trackers on a manual clock whose expiries are handed to an executor that
// runs them late at random, as a busy wheel goroutine would, while peers
// send bytes at random instants (most between ticks, many right after a
// probe) and stamp them with or without the At variants. It checks the
// policy's promises against the clock: a probe comes at least
// KeepaliveTime after the peer's last byte, one that follows an unanswered
// probe at least KeepaliveTimeout after it, and a close only after
// KeepaliveCount unanswered probes, KeepaliveTimeout after the last; every
// silent peer is closed, and no later than a tick plus the executor's delay
// after its deadline. TestSimulated_PolicyNeverEarly does the same with
// every policy at once, each tracker configured with a random set of them.
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

const never = int64(math.MaxInt64)

// simPeer is one simulated connection: its tracker, its configuration, and
// the instants of what happened on it.
type simPeer struct {
	tr  *idle.Tracker
	cfg idle.Config

	opened, silentFrom int64 // nothing happens on it after silentFrom
	next               int64 // its next event; never: none
	lastIn, lastAct    int64 // the last byte, the last activity
	frameAt, writeAt   int64 // the frame, the output in flight since; -1: none
	handshakeDone      bool
	drainedAt          int64 // when Drain was called; -1: not yet
	lastProbe          int64
	unanswered         int // probes since the last byte
	probes             int
	closed             bool
}

// lateExec holds the callbacks the wheel hands it until the simulation runs
// them, late.
type lateExec struct{ fs []func() }

func (e *lateExec) exec(f func()) { e.fs = append(e.fs, f) }

func simulatePolicies(t *testing.T, seed uint64, all bool) {
	const (
		ms      = int64(time.Millisecond)
		maxLate = 5 * ms // the longest the executor holds a callback
	)
	rng := rand.New(rand.NewPCG(seed, 7))
	clk := wheel.NewManualClock()
	late := &lateExec{}
	w := wheel.New(wheel.WithClock(clk), wheel.WithTick(time.Millisecond), wheel.WithExecutor(late.exec))
	defer w.Stop()
	clk.Advance(2*time.Second + time.Duration(rng.Int64N(ms)))
	now := int64(clk.Now())
	start := now
	durations := []time.Duration{2 * time.Millisecond, 3500 * time.Microsecond, 10 * time.Millisecond}
	dur := func() time.Duration { return durations[rng.IntN(len(durations))] }
	// stamped calls the method that reads the clock or its At variant, at
	// random.
	stamped := func(read func(), at func(time.Duration)) {
		if rng.IntN(2) == 0 {
			read()
		} else {
			at(time.Duration(now))
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
			frameAt: -1, writeAt: -1, drainedAt: -1, lastProbe: -1}
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
				if now < p.silentFrom && rng.IntN(4) != 0 {
					// Answer, often within the probe's tick.
					p.next = min(p.next, now+rng.Int64N(2*int64(cfg.KeepaliveTimeout)))
				}
			},
			Drain: func() {
				require.Equal(t, int64(-1), p.drainedAt, "peer %d: a second Drain", i)
				require.GreaterOrEqual(t, now-p.opened, int64(cfg.MaxAge), "peer %d: drained early, %+v", i, *cfg)
				p.drainedAt = now
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
				due, ok := p.tr.Due()
				require.True(t, ok)
				// The close comes at the first tick at or after its
				// deadline, plus what the executor and this loop's
				// steps of up to a tick add.
				assert.LessOrEqual(t, now-int64(due), 2*ms+maxLate, "peer %d at %v: closed %v after its deadline, %+v",
					i, at(), time.Duration(now-int64(due)), *cfg)
			},
		}
		var err error
		if rng.IntN(2) == 0 {
			p.tr, err = idle.New(w, *cfg, hooks)
		} else {
			p.tr, err = idle.NewAt(w, time.Duration(now), *cfg, hooks)
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

	// Advance the clock to the next peer event, the release of the held
	// callbacks or by a random step of at most a tick, whichever is first;
	// the wheel hands what falls due to the executor, which holds it for
	// up to maxLate.
	release := never
	for steps := 0; ; steps++ {
		require.Less(t, steps, 1_000_000)
		var next *simPeer
		for _, p := range peers {
			if !p.closed && p.next != never && (next == nil || p.next < next.next) {
				next = p
			}
		}
		if next == nil && w.Len() == 0 && len(late.fs) == 0 {
			break
		}
		target := min(now+1+rng.Int64N(ms), release)
		if next != nil {
			target = min(target, next.next)
		}
		clk.Advance(time.Duration(target - now))
		now = target
		if len(late.fs) > 0 && release == never {
			release = now
			if rng.IntN(3) == 0 {
				release += rng.Int64N(maxLate)
			}
		}
		if now >= release {
			fs := late.fs
			late.fs, release = nil, never
			for _, f := range fs {
				f()
			}
		}
		for _, p := range peers {
			if !p.closed && p.next == now {
				event(p)
				p.next = never
				if now < p.silentFrom {
					p.next = now + gap(p)
				}
			}
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
