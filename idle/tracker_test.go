package idle_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// harness drives one Tracker on a manual clock and records its hook calls as
// "probe 10s", "goaway 1m0s", "close:idle 40s": kind and the clock reading.
type harness struct {
	clk *wheel.ManualClock
	w   *wheel.Wheel
	tr  *idle.Tracker
	log []string
}

func newHarness(t *testing.T, cfg idle.Config) *harness {
	t.Helper()
	h := &harness{clk: wheel.NewManualClock()}
	h.w = wheel.New(wheel.WithClock(h.clk))
	t.Cleanup(h.w.Stop)
	tr, err := idle.NewTracker(h.w, cfg, idle.Hooks{
		Close:  func(r idle.Reason) { h.record("close:" + r.String()) },
		Probe:  func() { h.record("probe") },
		GoAway: func() { h.record("goaway") },
	})
	require.NoError(t, err)
	h.tr = tr
	return h
}

func (h *harness) record(kind string) {
	h.log = append(h.log, fmt.Sprintf("%s %v", kind, h.clk.Now()))
}

// op is an event a step applies to the tracker after advancing the clock.
type op string

const (
	none          op = ""
	activity      op = "activity"
	bytesIn       op = "bytesIn"
	received      op = "received"
	frameStart    op = "frameStart"
	frameEnd      op = "frameEnd"
	handshakeDone op = "handshakeDone"
	written       op = "written"
	drained       op = "drained"
	stop          op = "stop"
)

func (h *harness) do(o op) {
	switch o {
	case none:
	case activity:
		h.tr.Activity()
	case bytesIn:
		h.tr.BytesIn()
	case received:
		h.tr.Received()
	case frameStart:
		h.tr.FrameStart()
	case frameEnd:
		h.tr.FrameEnd()
	case handshakeDone:
		h.tr.HandshakeDone()
	case written:
		h.tr.Written()
	case drained:
		h.tr.Drained()
	case stop:
		h.tr.Stop()
	default:
		panic("unknown op " + o)
	}
}

// step advances the clock, then applies an event; want lists the hook calls
// observed during the step, with the exact clock reading of each.
type step struct {
	advance time.Duration
	event   op
	want    []string
}

func runSteps(t *testing.T, cfg idle.Config, steps []step) *harness {
	t.Helper()
	h := newHarness(t, cfg)
	for i, s := range steps {
		h.log = nil
		h.clk.Advance(s.advance)
		h.do(s.event)
		require.Equalf(t, s.want, h.log, "step %d: advance %v to %v, then %q", i, s.advance, h.clk.Now(), s.event)
	}
	return h
}

func TestTracker_Steps(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		cfg   idle.Config
		steps []step
	}{
		{
			name: "idle closes after no activity",
			cfg:  only(idle.Config{IdleTimeout: 30 * s}),
			steps: []step{
				{advance: 10 * s, event: activity},
				{advance: 29 * s, event: bytesIn}, // bytes alone are not activity
				{advance: 1 * s, want: []string{"close:idle 40s"}},
				{advance: time.Hour}, // nothing more, ever
			},
		},
		{
			name: "idle counts received as activity",
			cfg:  only(idle.Config{IdleTimeout: 30 * s}),
			steps: []step{
				{advance: 25 * s, event: received},
				{advance: 25 * s, event: received},
				{advance: 29 * s},
				{advance: 1 * s, want: []string{"close:idle 1m20s"}},
			},
		},
		{
			name: "dead peer: any inbound byte resets, activity does not",
			cfg:  only(idle.Config{ReadSilenceTimeout: 10 * s}),
			steps: []step{
				{advance: 9 * s, event: bytesIn},
				{advance: 9 * s, event: activity},
				{advance: 1 * s, want: []string{"close:dead_peer 19s"}},
			},
		},
		{
			name: "keepalive: one unanswered probe closes after Timeout",
			cfg:  only(idle.Config{KeepaliveTime: 10 * s, KeepaliveTimeout: 5 * s}),
			steps: []step{
				{advance: 10 * s, want: []string{"probe 10s"}},
				{advance: 4 * s},
				{advance: 1 * s, want: []string{"close:keepalive 15s"}},
			},
		},
		{
			name: "keepalive: an answer postpones the next probe by Time",
			cfg:  only(idle.Config{KeepaliveTime: 10 * s, KeepaliveTimeout: 5 * s}),
			steps: []step{
				{advance: 10 * s, want: []string{"probe 10s"}},
				{advance: 2 * s, event: bytesIn}, // the pong, at 12s
				{advance: 9 * s},
				{advance: 1 * s, want: []string{"probe 22s"}},
				{advance: 5 * s, want: []string{"close:keepalive 27s"}},
			},
		},
		{
			name: "keepalive: answer when Timeout exceeds Time",
			cfg:  only(idle.Config{KeepaliveTime: 10 * s, KeepaliveTimeout: 20 * s}),
			steps: []step{
				{advance: 10 * s, want: []string{"probe 10s"}},
				{advance: 1 * s, event: bytesIn},
				{advance: 10 * s, want: []string{"probe 21s"}},
				{advance: 20 * s, want: []string{"close:keepalive 41s"}},
			},
		},
		{
			name: "keepalive: Count probes, Timeout apart",
			cfg:  only(idle.Config{KeepaliveTime: 10 * s, KeepaliveTimeout: 5 * s, KeepaliveCount: 3}),
			steps: []step{
				{advance: 20 * s, want: []string{"probe 10s", "probe 15s", "probe 20s"}},
				{advance: 4 * s},
				{advance: 1 * s, want: []string{"close:keepalive 25s"}},
			},
		},
		{
			name: "keepalive: an answer to the second probe resets the count",
			cfg:  only(idle.Config{KeepaliveTime: 10 * s, KeepaliveTimeout: 5 * s, KeepaliveCount: 2}),
			steps: []step{
				{advance: 15 * s, want: []string{"probe 10s", "probe 15s"}},
				{advance: 1 * s, event: bytesIn},
				{advance: 15 * s, want: []string{"probe 26s", "probe 31s"}},
				{advance: 5 * s, want: []string{"close:keepalive 36s"}},
			},
		},
		{
			name: "keepalive: pongs do not keep an idle connection open",
			cfg:  only(idle.Config{IdleTimeout: 25 * s, KeepaliveTime: 10 * s, KeepaliveTimeout: 5 * s}),
			steps: []step{
				{advance: 10 * s, want: []string{"probe 10s"}},
				{advance: 1 * s, event: bytesIn},
				{advance: 10 * s, want: []string{"probe 21s"}},
				{advance: 1 * s, event: bytesIn},
				{advance: 3 * s, want: []string{"close:idle 25s"}},
			},
		},
		{
			name: "frame deadline is absolute: partial bytes do not extend it",
			cfg:  only(idle.Config{FrameTimeout: 5 * s}),
			steps: []step{
				{advance: 1 * s, event: frameStart},
				{advance: 1 * s, event: frameStart}, // partial bytes
				{advance: 1 * s, event: bytesIn},
				{advance: 1 * s, event: frameStart},
				{advance: 1 * s, event: received},
				{advance: 1 * s, want: []string{"close:frame_deadline 6s"}},
			},
		},
		{
			name: "frame deadline cleared by FrameEnd, re-armed by the next frame",
			cfg:  only(idle.Config{FrameTimeout: 5 * s}),
			steps: []step{
				{advance: 1 * s, event: frameStart},
				{advance: 4 * s, event: frameEnd},
				{advance: 1 * s, event: frameStart}, // 6s: deadline 11s
				{advance: 3 * s, event: frameEnd},   // 9s
				{advance: 1 * s, event: frameStart}, // 10s: deadline 15s
				{advance: 10 * s, want: []string{"close:frame_deadline 15s"}},
			},
		},
		{
			name: "no frame in flight: no frame close",
			cfg:  only(idle.Config{FrameTimeout: 5 * s}),
			steps: []step{
				{advance: 1 * s, event: frameStart},
				{advance: 1 * s, event: frameEnd},
				{advance: time.Hour},
			},
		},
		{
			name: "handshake deadline",
			cfg:  only(idle.Config{HandshakeTimeout: 3 * s}),
			steps: []step{
				{advance: 2 * s, event: activity},
				{advance: 1 * s, want: []string{"close:handshake 3s"}},
			},
		},
		{
			name: "handshake done in time",
			cfg:  only(idle.Config{HandshakeTimeout: 3 * s, IdleTimeout: 10 * s}),
			steps: []step{
				{advance: 2 * s, event: handshakeDone},
				{advance: 8 * s, want: []string{"close:idle 10s"}},
			},
		},
		{
			name: "max age without grace closes at once",
			cfg:  only(idle.Config{MaxAge: 60 * s}),
			steps: []step{
				{advance: 59 * s, event: received},
				{advance: 1 * s, want: []string{"close:max_age 1m0s"}},
			},
		},
		{
			name: "max age with grace: go away, then close",
			cfg:  only(idle.Config{MaxAge: 60 * s, MaxAgeGrace: 5 * s}),
			steps: []step{
				{advance: 60 * s, want: []string{"goaway 1m0s"}},
				{advance: 4 * s, event: received},
				{advance: 1 * s, want: []string{"close:max_age 1m5s"}},
			},
		},
		{
			name: "max age jitter from the injected source",
			// Jitter(2*10s+1ns) returns 3s: age = 60s-10s+3s = 53s.
			cfg: only(idle.Config{MaxAge: 60 * s, MaxAgeJitter: 10 * s, MaxAgeGrace: 5 * s,
				Jitter: func(int64) int64 { return int64(3 * s) }}),
			steps: []step{
				{advance: 53 * s, want: []string{"goaway 53s"}},
				{advance: 5 * s, want: []string{"close:max_age 58s"}},
			},
		},
		{
			name: "write stall: cleared by Drained, closes when output stays queued",
			cfg:  only(idle.Config{WriteStallTimeout: 4 * s}),
			steps: []step{
				{advance: 1 * s, event: written},
				{advance: 3 * s, event: drained}, // 4s
				{advance: 1 * s, event: written}, // 5s: deadline 9s
				{advance: 1 * s, event: written}, // does not extend
				{advance: 2 * s},
				{advance: 1 * s, want: []string{"close:write_stall 9s"}},
			},
		},
		{
			name: "several due at once: one close, first in priority order",
			cfg:  only(idle.Config{IdleTimeout: 10 * s, ReadSilenceTimeout: 10 * s, HandshakeTimeout: 10 * s}),
			steps: []step{
				{advance: time.Minute, want: []string{"close:handshake 10s"}},
			},
		},
		{
			// Deadlines due at the same instant, from different stamps,
			// are acted on in one firing, in priority order.
			name: "due together from different stamps: probe and go-away at once",
			cfg: only(idle.Config{KeepaliveTime: 50 * s, KeepaliveTimeout: 10 * s,
				MaxAge: 60 * s, MaxAgeGrace: 5 * s}),
			steps: []step{
				{advance: 10 * s, event: bytesIn},
				{advance: 50 * s, want: []string{"probe 1m0s", "goaway 1m0s"}},
				{advance: 5 * s, want: []string{"close:max_age 1m5s"}},
			},
		},
		{
			name: "stop before anything is due: no close ever",
			cfg: only(idle.Config{IdleTimeout: 10 * s, KeepaliveTime: 2 * s, KeepaliveTimeout: time.Second,
				FrameTimeout: s, WriteStallTimeout: s}),
			steps: []step{
				{advance: s, event: frameStart},
				{advance: 0, event: written},
				{advance: 0, event: stop},
				{advance: time.Hour},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := runSteps(t, tt.cfg, tt.steps)
			h.tr.Stop()
			assert.Zero(t, h.w.Len(), "timers left pending after the tracker ended")
		})
	}
}

// TestTracker_NoProbeWhileTrafficFlows sends a byte every 9s (just under
// KeepaliveTime) for an hour: no probe, no close.
func TestTracker_NoProbeWhileTrafficFlows(t *testing.T) {
	h := newHarness(t, only(idle.Config{KeepaliveTime: 10 * time.Second, KeepaliveTimeout: time.Second,
		ReadSilenceTimeout: 11 * time.Second}))
	for range 400 {
		h.clk.Advance(9 * time.Second)
		h.tr.BytesIn()
	}
	require.Empty(t, h.log)
	h.clk.Advance(10 * time.Second)
	require.Equal(t, []string{"probe 1h0m10s"}, h.log, "silence must still be noticed afterwards")
}

// TestTracker_CloseOnce checks that every reason is delivered once, the
// tracker ends, its timers are released and later events do nothing.
func TestTracker_CloseOnce(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		cfg   idle.Config
		setup op
		want  idle.Reason
	}{
		{cfg: only(idle.Config{IdleTimeout: s}), want: idle.ReasonIdle},
		{cfg: only(idle.Config{ReadSilenceTimeout: s}), want: idle.ReasonDeadPeer},
		{cfg: only(idle.Config{KeepaliveTime: s, KeepaliveTimeout: s}), want: idle.ReasonKeepalive},
		{cfg: only(idle.Config{FrameTimeout: s}), setup: frameStart, want: idle.ReasonFrameDeadline},
		{cfg: only(idle.Config{HandshakeTimeout: s}), want: idle.ReasonHandshake},
		{cfg: only(idle.Config{MaxAge: s}), want: idle.ReasonMaxAge},
		{cfg: only(idle.Config{WriteStallTimeout: s}), setup: written, want: idle.ReasonWriteStall},
	} {
		t.Run(tc.want.String(), func(t *testing.T) {
			clk := wheel.NewManualClock()
			w := wheel.New(wheel.WithClock(clk))
			defer w.Stop()
			var got []idle.Reason
			var tr *idle.Tracker
			tr, err := idle.NewTracker(w, tc.cfg, idle.Hooks{
				Close: func(r idle.Reason) {
					got = append(got, r)
					assert.Equal(t, r, tr.Reason(), "Reason is set before the hook runs")
					assert.False(t, tr.Stop(), "Stop after a close reports false")
				},
				Probe: func() {},
			})
			require.NoError(t, err)
			(&harness{tr: tr}).do(tc.setup)
			assert.Equal(t, idle.ReasonNone, tr.Reason())
			clk.Advance(time.Minute)
			require.Equal(t, []idle.Reason{tc.want}, got)
			assert.Zero(t, w.Len(), "timers released")
			for _, o := range []op{activity, bytesIn, frameStart, written, handshakeDone} {
				(&harness{tr: tr}).do(o)
			}
			clk.Advance(time.Hour)
			assert.Len(t, got, 1)
			assert.Zero(t, w.Len(), "no timer re-armed after the close")
			assert.Equal(t, tc.want, tr.Reason())
			assert.False(t, tr.Stop())
		})
	}
}

// TestTracker_BeyondWheelRange: on a 100µs wheel, whose range is about 7
// years, deadlines of 20 years are never armed (the wheel would clamp them
// to its range, and their firing would not mean that they had passed), and
// nothing closes when the range is reached.
func TestTracker_BeyondWheelRange(t *testing.T) {
	const year = 365 * 24 * time.Hour
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk), wheel.WithTick(wheel.MinTick))
	defer w.Stop()
	require.Less(t, w.MaxDuration(), 8*year)
	var got []idle.Reason
	hooks := idle.Hooks{Close: func(r idle.Reason) { got = append(got, r) }}
	far, err := idle.NewTracker(w, only(idle.Config{MaxAge: 20 * year, MaxAgeGrace: year, IdleTimeout: 19 * year,
		FrameTimeout: 20 * year, WriteStallTimeout: 20 * year}), hooks)
	require.NoError(t, err)
	far.FrameStart()
	far.Written()
	assert.Zero(t, w.Len(), "no timer armed beyond the wheel's range")
	near, err := idle.NewTracker(w, only(idle.Config{IdleTimeout: 5 * year}), hooks)
	require.NoError(t, err)
	clk.Advance(w.MaxDuration() + time.Second)
	assert.Equal(t, []idle.Reason{idle.ReasonIdle}, got, "only the deadline within range is enforced")
	assert.Equal(t, idle.ReasonNone, far.Reason())
	assert.Equal(t, idle.ReasonIdle, near.Reason())
	far.Stop()
}

func TestTracker_StopReleasesTimers(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	cfg := only(idle.Config{IdleTimeout: time.Minute, FrameTimeout: time.Second, WriteStallTimeout: time.Second})
	var trs []*idle.Tracker
	for range 100 {
		tr, err := idle.NewTracker(w, cfg, idle.Hooks{Close: func(idle.Reason) { t.Error("unexpected close") }})
		require.NoError(t, err)
		tr.FrameStart()
		tr.Written()
		trs = append(trs, tr)
	}
	require.Equal(t, 300, w.Len(), "policy, frame and write timer each")
	for _, tr := range trs {
		assert.True(t, tr.Stop())
		assert.False(t, tr.Stop(), "second Stop")
	}
	assert.Zero(t, w.Len())
	clk.Advance(time.Hour)
	for _, tr := range trs {
		tr.FrameStart() // after Stop: must not arm again
		tr.Written()
	}
	assert.Zero(t, w.Len())
}

func TestTracker_OnlyConfiguredTimers(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	tr, err := idle.NewTracker(w, only(idle.Config{}), idle.Hooks{Close: func(idle.Reason) {}})
	require.NoError(t, err)
	tr.Received()
	tr.FrameStart()
	tr.Written()
	assert.Zero(t, w.Len(), "the zero Config arms nothing")
	tr2, err := idle.NewTracker(w, only(idle.Config{IdleTimeout: time.Second, ReadSilenceTimeout: 2 * time.Second,
		KeepaliveTime: time.Second, KeepaliveTimeout: time.Second, HandshakeTimeout: time.Second,
		MaxAge: time.Minute}), idle.Hooks{Close: func(idle.Reason) {}, Probe: func() {}})
	require.NoError(t, err)
	tr2.Received()
	assert.Equal(t, 1, w.Len(), "five policies share one timer")
	tr.Stop()
	tr2.Stop()
}

// TestTracker_MaxAgeJitterBounds draws ages from the default random source
// and from sources that return out-of-range values, which are clamped.
func TestTracker_MaxAgeJitterBounds(t *testing.T) {
	const age, jit = 100 * time.Second, 10 * time.Second
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	newAge := func(src func(int64) int64) time.Duration {
		tr, err := idle.NewTracker(w, only(idle.Config{MaxAge: age, MaxAgeJitter: jit, Jitter: src}),
			idle.Hooks{Close: func(idle.Reason) {}})
		require.NoError(t, err)
		defer tr.Stop()
		return tr.AgeAt()
	}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 2000 {
		a := newAge(nil)
		require.GreaterOrEqual(t, a, age-jit)
		require.LessOrEqual(t, a, age+jit)
		lo, hi = min(lo, a), max(hi, a)
	}
	assert.Less(t, lo, age-jit/2, "jitter spreads below MaxAge")
	assert.Greater(t, hi, age+jit/2, "jitter spreads above MaxAge")

	var gotN int64
	assert.Equal(t, age-jit, newAge(func(n int64) int64 { gotN = n; return -5 }))
	assert.Equal(t, int64(2*jit+1), gotN, "source asked for [0, 2*jitter]")
	assert.Equal(t, age+jit, newAge(func(n int64) int64 { return n + 100 }))
	assert.Equal(t, age, newAge(func(n int64) int64 { return n / 2 }))
	assert.Equal(t, age, idleAgeNoJitter(t, w, age))
}

func idleAgeNoJitter(t *testing.T, w *wheel.Wheel, age time.Duration) time.Duration {
	tr, err := idle.NewTracker(w, only(idle.Config{MaxAge: age, Jitter: func(int64) int64 { panic("not called without jitter") }}),
		idle.Hooks{Close: func(idle.Reason) {}})
	require.NoError(t, err)
	defer tr.Stop()
	return tr.AgeAt()
}

func TestNew_Hooks(t *testing.T) {
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	defer w.Stop()
	_, err := idle.NewTracker(w, only(idle.Config{IdleTimeout: time.Second}), idle.Hooks{})
	assert.ErrorIs(t, err, idle.ErrHook)
	_, err = idle.NewTracker(w, only(idle.Config{KeepaliveTime: time.Second, KeepaliveTimeout: time.Second}),
		idle.Hooks{Close: func(idle.Reason) {}})
	assert.ErrorIs(t, err, idle.ErrHook)
	_, err = idle.NewTracker(w, only(idle.Config{KeepaliveCount: -1}), idle.Hooks{Close: func(idle.Reason) {}})
	assert.ErrorIs(t, err, idle.ErrNegative)
	assert.Zero(t, w.Len())
}

func TestReason_Names(t *testing.T) {
	want := map[idle.Reason]string{
		idle.ReasonIdle: "idle", idle.ReasonDeadPeer: "dead_peer", idle.ReasonKeepalive: "keepalive",
		idle.ReasonFrameDeadline: "frame_deadline", idle.ReasonHandshake: "handshake",
		idle.ReasonMaxAge: "max_age", idle.ReasonWriteStall: "write_stall",
	}
	rs := idle.Reasons()
	require.Len(t, rs, len(want))
	for _, r := range rs {
		assert.Equal(t, want[r], r.String())
		assert.Equal(t, want[r], r.Error())
		assert.Equal(t, want[r], fmt.Sprint(r), "fmt prints the label")
	}
	assert.Equal(t, "none", idle.ReasonNone.String())
	assert.Equal(t, "unknown", idle.Reason(200).String())
}

func TestTracker_Due(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		cfg     idle.Config
		after   time.Duration // clock advance before the event
		event   op
		reason  idle.Reason
		wantDue time.Duration
	}{
		{name: "idle", cfg: only(idle.Config{IdleTimeout: 100 * ms}), after: 30 * ms, event: activity, reason: idle.ReasonIdle, wantDue: 130 * ms},
		{name: "read silence", cfg: only(idle.Config{ReadSilenceTimeout: 60 * ms}), after: 10 * ms, event: bytesIn, reason: idle.ReasonDeadPeer, wantDue: 70 * ms},
		{name: "keepalive", cfg: only(idle.Config{KeepaliveTime: 50 * ms, KeepaliveTimeout: 20 * ms}), after: 5 * ms, event: bytesIn, reason: idle.ReasonKeepalive, wantDue: 75 * ms},
		{name: "handshake", cfg: only(idle.Config{HandshakeTimeout: 25 * ms}), reason: idle.ReasonHandshake, wantDue: 25 * ms},
		{name: "frame", cfg: only(idle.Config{FrameTimeout: 40 * ms}), after: 10 * ms, event: frameStart, reason: idle.ReasonFrameDeadline, wantDue: 50 * ms},
		{name: "write stall", cfg: only(idle.Config{WriteStallTimeout: 30 * ms}), after: 5 * ms, event: written, reason: idle.ReasonWriteStall, wantDue: 35 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			h.clk.Advance(tc.after)
			h.do(tc.event)
			_, ok := h.tr.Due()
			assert.False(t, ok, "no deadline while open")
			h.clk.Advance(time.Second)
			require.Equal(t, tc.reason, h.tr.Reason())
			due, ok := h.tr.Due()
			require.True(t, ok)
			assert.Equal(t, tc.wantDue, due)
			assert.Equal(t, []string{"close:" + tc.reason.String() + " " + due.String()}, h.log[len(h.log)-1:],
				"on a manual clock the close comes exactly at its deadline")
		})
	}
	t.Run("stopped", func(t *testing.T) {
		h := newHarness(t, only(idle.Config{IdleTimeout: 10 * ms}))
		h.do(stop)
		h.clk.Advance(time.Second)
		_, ok := h.tr.Due()
		assert.False(t, ok, "a stopped tracker closed nothing")
	})
}

// TestTracker_ExplicitTime checks the At variants: each deadline runs from
// the time passed in, not from the clock's reading at the call, and fires at
// the first tick at or after it.
func TestTracker_ExplicitTime(t *testing.T) {
	const us = time.Microsecond
	cases := []struct {
		name    string
		cfg     idle.Config
		openAt  time.Duration // Init's time
		event   func(tr *idle.Tracker)
		reason  idle.Reason
		due     time.Duration
		closeAt time.Duration // the tick the close comes at
	}{
		{name: "open", cfg: only(idle.Config{IdleTimeout: 10 * time.Millisecond}), openAt: 4700 * us,
			event: func(*idle.Tracker) {}, reason: idle.ReasonIdle, due: 14700 * us, closeAt: 15 * time.Millisecond},
		{name: "activity", cfg: only(idle.Config{IdleTimeout: 10 * time.Millisecond}), openAt: 4700 * us,
			event:  func(tr *idle.Tracker) { tr.ActivityAt(5200 * us) },
			reason: idle.ReasonIdle, due: 15200 * us, closeAt: 16 * time.Millisecond},
		{name: "received", cfg: only(idle.Config{IdleTimeout: time.Hour, ReadSilenceTimeout: 3 * time.Millisecond}), openAt: 4700 * us,
			event:  func(tr *idle.Tracker) { tr.ReceivedAt(5250 * us) },
			reason: idle.ReasonDeadPeer, due: 8250 * us, closeAt: 9 * time.Millisecond},
		{name: "bytes in", cfg: only(idle.Config{ReadSilenceTimeout: 3 * time.Millisecond}), openAt: 4700 * us,
			event:  func(tr *idle.Tracker) { tr.BytesInAt(5100 * us) },
			reason: idle.ReasonDeadPeer, due: 8100 * us, closeAt: 9 * time.Millisecond},
		{name: "frame", cfg: only(idle.Config{FrameTimeout: 8 * time.Millisecond}), openAt: 4700 * us,
			event:  func(tr *idle.Tracker) { tr.FrameStartAt(5100 * us) },
			reason: idle.ReasonFrameDeadline, due: 13100 * us, closeAt: 14 * time.Millisecond},
		{name: "write", cfg: only(idle.Config{WriteStallTimeout: 8 * time.Millisecond}), openAt: 4700 * us,
			event:  func(tr *idle.Tracker) { tr.WrittenAt(5010 * us) },
			reason: idle.ReasonWriteStall, due: 13010 * us, closeAt: 14 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := wheel.NewManualClock()
			w := wheel.New(wheel.WithClock(clk))
			defer w.Stop()
			clk.Advance(5300 * us) // every time passed in lies before this
			var got []string
			tr := new(idle.Tracker)
			require.NoError(t, tr.Init(w, tc.openAt, tc.cfg, idle.Hooks{Close: func(r idle.Reason) {
				got = append(got, fmt.Sprintf("%v at %v", r, clk.Now()))
			}}))
			tc.event(tr)
			clk.Advance(tc.closeAt - time.Millisecond - clk.Now())
			require.Empty(t, got, "nothing before the tick of the deadline")
			clk.Advance(time.Millisecond)
			assert.Equal(t, []string{fmt.Sprintf("%v at %v", tc.reason, tc.closeAt)}, got)
			due, ok := tr.Due()
			require.True(t, ok)
			assert.Equal(t, tc.due, due)
		})
	}
}

// TestTracker_LateStampIgnored: a stamp whose time is earlier than one
// already recorded (another goroutine read the clock first and stored
// last) must not move the stamp back, or the timeout would run from the
// earlier event and close early: with IdleTimeout 10s and activity at 2s,
// nothing closes at 11s.
func TestTracker_LateStampIgnored(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name    string
		cfg     idle.Config
		stamp   func(tr *idle.Tracker, at time.Duration)
		reason  idle.Reason
		wantDue time.Duration
	}{
		{name: "activity", cfg: only(idle.Config{IdleTimeout: 10 * s}),
			stamp: (*idle.Tracker).ActivityAt, reason: idle.ReasonIdle, wantDue: 12 * s},
		{name: "received", cfg: only(idle.Config{IdleTimeout: 10 * s}),
			stamp: (*idle.Tracker).ReceivedAt, reason: idle.ReasonIdle, wantDue: 12 * s},
		{name: "bytes in", cfg: only(idle.Config{ReadSilenceTimeout: 10 * s}),
			stamp: (*idle.Tracker).BytesInAt, reason: idle.ReasonDeadPeer, wantDue: 12 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			h.clk.Advance(2 * s)
			tc.stamp(h.tr, 2*s) // the writer's event
			tc.stamp(h.tr, 1*s) // the reader's, clock read at 1s, stored late
			assert.Equal(t, 2*s, max(h.tr.LastActivity(), h.tr.LastIn()), "the later stamp stays")
			h.clk.Advance(9 * s) // 11s: 10s after the late stamp, 9s after the last event
			require.Empty(t, h.log, "closed from the late, earlier stamp")
			h.clk.Advance(s)
			assert.Equal(t, []string{"close:" + tc.reason.String() + " 12s"}, h.log)
			due, ok := h.tr.Due()
			require.True(t, ok)
			assert.Equal(t, tc.wantDue, due)
		})
	}
}

// TestTracker_MaxAgeJitterHuge: for a jitter above 2^62, 2*MaxAgeJitter+1
// overflows an int64; the source must still be asked for the whole range
// of ages a Duration can hold, [MaxAge-MaxAgeJitter, MaxInt64], and each
// end of it must be reachable.
func TestTracker_MaxAgeJitterHuge(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		name         string
		maxAge, jit  time.Duration
		wantN        int64         // the range the source is asked for
		wantLo, want time.Duration // ages for draws 0 and n-1
	}{
		{name: "no overflow", maxAge: time.Hour, jit: 10 * time.Minute,
			wantN: int64(20*time.Minute) + 1, wantLo: 50 * time.Minute, want: 70 * time.Minute},
		{name: "2*jitter+1 just overflows", maxAge: 1<<62 + time.Hour, jit: 1 << 62,
			wantN: int64(maxDur-time.Hour) + 1, wantLo: time.Hour, want: maxDur},
		{name: "largest", maxAge: maxDur, jit: maxDur - time.Hour,
			wantN: int64(maxDur-time.Hour) + 1, wantLo: time.Hour, want: maxDur},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
			defer w.Stop()
			ageFor := func(draw func(n int64) int64) (time.Duration, int64) {
				var gotN int64
				cfg := only(idle.Config{MaxAge: tc.maxAge, MaxAgeJitter: tc.jit,
					Jitter: func(n int64) int64 { gotN = n; return draw(n) }})
				require.NoError(t, cfg.Validate())
				tr, err := idle.NewTracker(w, cfg, idle.Hooks{Close: func(idle.Reason) {}})
				require.NoError(t, err)
				defer tr.Stop()
				return tr.AgeAt(), gotN
			}
			lo, n := ageFor(func(int64) int64 { return 0 })
			assert.Equal(t, tc.wantN, n, "the range asked of the source")
			assert.Equal(t, tc.wantLo, lo, "age for the lowest draw")
			hi, _ := ageFor(func(n int64) int64 { return n - 1 })
			assert.Equal(t, tc.want, hi, "age for the highest draw")
		})
	}
}
