package main

import (
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// TestJudged_ExitStatus: a server that closes late, or never, judged with
// the harness's lag injected: on a quiet machine the run fails (exit
// status 1); with a lag that explains it, it is not judged (3); on time,
// it passes whatever the lag.
func TestJudged_ExitStatus(t *testing.T) {
	to := report.Timeouts{Idle: 3 * time.Second, Tick: time.Millisecond, Slack: 500 * time.Millisecond}
	run := func(late time.Duration, never bool, l *report.SelfLag) *report.Result {
		s := report.NewScenario(scenario.Idle, scenario.Lookup(scenario.Idle).Expect)
		s.Proto, s.Horizon = "raw", defaultHorizon
		exp := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		for range 100 {
			r := report.ConnResult{Expect: "idle", ExpectedAt: exp, End: "eof", ClosedAt: exp.Add(late)}
			if never {
				r.End, r.ClosedAt = report.EndClient, time.Time{}
			}
			s.Add(r, to, true)
		}
		return &report.Result{Version: report.Version, Config: report.Config{Target: "embedded 127.0.0.1:1", Proto: "raw", Timeouts: to},
			Scenarios: []*report.Scenario{s}, SelfLag: l}
	}
	// lagged returns the figures of a harness whose every 1 ms wake came
	// late by late, kept waiting stalled of 12 s, beside other processes
	// that took others of its 24 CPU-s.
	lagged := func(late, stalled, others time.Duration) *report.SelfLag {
		h := &hist.Histogram{}
		for range 1000 {
			h.Record(int64(late))
		}
		return &report.SelfLag{Lag: h, Stalled: stalled, Wall: 12 * time.Second, CPUs: 2, OtherCPU: others}
	}
	quiet := lagged(200*time.Microsecond, 300*time.Millisecond, 2*time.Second)
	starved := lagged(400*time.Millisecond, 11*time.Second, 23*time.Second)
	tests := []struct {
		name string
		r    *report.Result
		want error
	}{
		{name: "on time, quiet", r: run(3*time.Millisecond, false, quiet), want: nil},
		{name: "on time, starved", r: run(3*time.Millisecond, false, starved), want: nil},
		{name: "1.3 s late, quiet", r: run(1300*time.Millisecond, false, quiet), want: errJudged},
		{name: "1.3 s late, starved", r: run(1300*time.Millisecond, false, starved), want: errStarved},
		{name: "never, quiet", r: run(0, true, quiet), want: errJudged},
		{name: "never, starved longer than the horizon", r: run(0, true, starved), want: errStarved},
		{name: "never, starved less than the horizon", r: run(0, true, lagged(400*time.Millisecond, 9*time.Second, 23*time.Second)), want: errJudged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, judged(tt.r.Judge()))
		})
	}
}

// TestEndToEnd_LateServerMeasured: a server whose idle timeout fires
// 600 ms late, beyond the 100 ms slack, is measured up to the horizon and
// failed; or, if this machine starved the harness meanwhile, not judged,
// which its own figures must then say.
func TestEndToEnd_LateServerMeasured(t *testing.T) {
	const idle, late = 300 * time.Millisecond, 600 * time.Millisecond
	addr := testnet.Serve(t, func(c net.Conn, _ uint64) {
		buf := make([]byte, 512)
		for {
			_ = c.SetReadDeadline(time.Now().Add(idle + late))
			n, err := c.Read(buf)
			if n > 0 {
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	r, out := e2e(t, "-addr", addr, "-proto", "raw", "-scenario", "idle", "-conns", "20",
		"-idle", idle.String(), "-slack", "100ms", "-close-horizon", "3s")
	s := r.Scenario(scenario.Idle)
	require.NotNil(t, s)
	assert.Equal(t, 20, s.Closes.Late+s.Closes.Never, "every close beyond the slack")
	assert.Zero(t, s.Closes.Never, "a close 600 ms late is within the 3 s horizon")
	assert.GreaterOrEqual(t, s.Closes.FromStart.Min(), int64(late), "measured, not cut off at the slack")
	assert.Contains(t, out, "closed late, after their deadline counted from the server's last answer")
	if r.Judge().NotJudged > 0 {
		assert.True(t, r.SelfLag.Starved(), "not judged only when starved:\n%s", out)
		return
	}
	assert.Equal(t, 1, r.Judge().Failures, out)
}
