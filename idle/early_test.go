package idle_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// TestTracker_NeverEarlyUnderHiccups checks on a real 1 ms wheel, against
// time.Now, that no timeout closes (or probes) before its duration has passed
// since the event it is measured from, while the wheel's goroutine is held
// up and its timers fire late.
//
// With one P, a goroutine that spins without yielding keeps the wheel's
// goroutine off the CPU until the runtime preempts it (about every 10 ms),
// and reports events all the while: when a timer armed for an old deadline
// finally fires, the events have moved its deadline on. A callback that
// acted on the deadline its timer was armed for, rather than on the
// deadlines passed by the clock it reads, would close early. The spinner
// reads time.Now before each event, so that reading is never later than
// the event's stamp.
func TestTracker_NeverEarlyUnderHiccups(t *testing.T) {
	const (
		timeout = 30 * time.Millisecond
		spin    = 25 * time.Millisecond
		rounds  = 3
	)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := wheel.New(wheel.WithTick(time.Millisecond))
	defer w.Stop()
	tests := []struct {
		name string
		cfg  idle.Config
		// event is reported over and over while the wheel is held up; nil
		// means the tracker itself is created at the end of the hold-up.
		event func(*idle.Tracker)
		want  idle.Reason
		// probeAfter is the least real time from the last event to the
		// probe (0: no probe expected); closeAfter, to the close.
		probeAfter, closeAfter time.Duration
	}{
		{name: "idle", cfg: only(idle.Config{IdleTimeout: timeout}),
			event: (*idle.Tracker).Received, want: idle.ReasonIdle, closeAfter: timeout},
		{name: "dead peer", cfg: only(idle.Config{ReadSilenceTimeout: timeout}),
			event: (*idle.Tracker).BytesIn, want: idle.ReasonDeadPeer, closeAfter: timeout},
		{name: "keepalive", cfg: only(idle.Config{KeepaliveTime: timeout, KeepaliveTimeout: timeout}),
			event: (*idle.Tracker).BytesIn, want: idle.ReasonKeepalive, probeAfter: timeout, closeAfter: 2 * timeout},
		{name: "frame", cfg: only(idle.Config{FrameTimeout: timeout}),
			event: func(tr *idle.Tracker) { tr.FrameEnd(); tr.FrameStart() },
			want:  idle.ReasonFrameDeadline, closeAfter: timeout},
		{name: "write stall", cfg: only(idle.Config{WriteStallTimeout: timeout}),
			event: func(tr *idle.Tracker) { tr.Drained(); tr.Written() },
			want:  idle.ReasonWriteStall, closeAfter: timeout},
		{name: "handshake", cfg: only(idle.Config{HandshakeTimeout: timeout}),
			want: idle.ReasonHandshake, closeAfter: timeout},
		{name: "max age", cfg: only(idle.Config{MaxAge: timeout}),
			want: idle.ReasonMaxAge, closeAfter: timeout},
	}
	type hook struct {
		what string
		at   time.Time
		r    idle.Reason
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range rounds {
				hooks := make(chan hook, 8)
				newTracker := func() *idle.Tracker {
					tr, err := idle.NewTracker(w, tt.cfg, idle.Hooks{
						Close: func(r idle.Reason) { hooks <- hook{what: "close", at: time.Now(), r: r} },
						Probe: func() { hooks <- hook{what: "probe", at: time.Now()} },
					})
					require.NoError(t, err)
					return tr
				}
				var tr *idle.Tracker
				if tt.event != nil {
					tr = newTracker()
				}
				// Hold the wheel up: spin without yielding, reporting events.
				var last, lastDone time.Time
				for end := time.Now().Add(spin); ; {
					now := time.Now()
					if now.After(end) {
						break
					}
					last = now
					if tt.event != nil {
						tt.event(tr)
					}
					lastDone = time.Now()
				}
				if tt.event == nil {
					tr = newTracker()
				}
				var probe time.Time
				for done := false; !done; {
					select {
					case h := <-hooks:
						switch h.what {
						case "probe":
							// Under load the spinner may be held off the CPU
							// between its clock reading and the event for
							// longer than the timeout: a first probe sent
							// before the event is answered by it, and a
							// second one follows.
							require.True(t, probe.IsZero() || probe.Before(lastDone),
								"round %d: a second probe, the first unanswered", round)
							require.NotZero(t, tt.probeAfter, "round %d: unexpected probe", round)
							probe = h.at
							assert.GreaterOrEqual(t, h.at.Sub(last), tt.probeAfter,
								"round %d: probe sent early", round)
						case "close":
							assert.Equal(t, tt.want, h.r, "round %d", round)
							assert.GreaterOrEqual(t, h.at.Sub(last), tt.closeAfter,
								"round %d: closed early", round)
							done = true
						}
					case <-time.After(time.Second):
						require.Fail(t, "no close", "round %d", round)
					}
				}
				if tt.probeAfter != 0 {
					assert.False(t, probe.IsZero(), "round %d: no probe before the close", round)
				}
				tr.Stop()
			}
		})
	}
}
