package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	to = Timeouts{Idle: 2 * time.Second, Tick: time.Millisecond, Slack: 100 * time.Millisecond}
)

func TestScenario_AddClassifiesCloses(t *testing.T) {
	exp := t0.Add(2 * time.Second)
	tests := []struct {
		name        string
		proto       string // "": framed
		r           ConnResult
		reaped      int
		late        int
		never       int
		early       int
		wrongReason string
	}{
		{name: "on time", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(3 * time.Millisecond)}, reaped: 1},
		{name: "half a tick early is tolerated", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(-500 * time.Microsecond)}, reaped: 1},
		{name: "early", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(-2 * time.Millisecond)}, early: 1},
		{name: "beyond the slack is late, and measured", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(101 * time.Millisecond)}, late: 1},
		{name: "late for another reason is late", r: ConnResult{End: "dead_peer", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(3 * time.Second)}, late: 1},
		{name: "never closed", r: ConnResult{End: "client", Expect: "idle", ExpectedAt: exp}, never: 1},
		{name: "raw eof counts as idle", proto: "raw", r: ConnResult{End: "eof", Expect: "idle", ExpectedAt: exp, ClosedAt: exp}, reaped: 1},
		{name: "framed eof is no idle close: no CLOSE frame said why", proto: "framed", r: ConnResult{End: "eof", Expect: "idle", ExpectedAt: exp, ClosedAt: exp}, wrongReason: "eof"},
		{name: "eof of a scenario without a protocol counts as framed", r: ConnResult{End: "eof", Expect: "idle", ExpectedAt: exp, ClosedAt: exp}, wrongReason: "eof"},
		{name: "raw eof is no dead peer", proto: "raw", r: ConnResult{End: "eof", Expect: "dead_peer", ExpectedAt: exp, ClosedAt: exp}, wrongReason: "eof"},
		{name: "wrong reason", r: ConnResult{End: "dead_peer", Expect: "idle", ExpectedAt: exp, ClosedAt: exp}, wrongReason: "dead_peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScenario("idle", expectOf("idle"))
			s.Proto = tt.proto
			s.Add(tt.r, to, true)
			assert.Equal(t, 1, s.Closes.Expected)
			assert.Equal(t, tt.reaped, s.Closes.OnTime, "reaped")
			assert.Equal(t, tt.late, s.Closes.Late, "late")
			assert.Equal(t, tt.never, s.Closes.Never, "never")
			assert.Equal(t, tt.early, s.Closes.Early, "early")
			if tt.wrongReason != "" {
				assert.Equal(t, 1, s.Closes.OtherReason[tt.wrongReason])
				assert.NotEmpty(t, verdict(s), "a wrong reason fails the scenario")
			}
			if !tt.r.ClosedAt.IsZero() {
				assert.Equal(t, int64(tt.r.ClosedAt.Sub(exp)), s.Closes.FromStart.Max())
			}
		})
	}
}

// TestScenario_VerdictSaysByHowMuch checks every timing verdict gives its
// figures: how early, how late, and the horizon of a never.
func TestScenario_VerdictSaysByHowMuch(t *testing.T) {
	exp := t0.Add(2 * time.Second)
	s := NewScenario("idle", expectOf("idle"))
	s.Proto, s.Horizon = "raw", 10*time.Second
	for i := range 1000 {
		r := ConnResult{End: "eof", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(time.Millisecond)}
		switch {
		case i < 341: // nginx: a third early, by up to 298 ms
			r.ClosedAt = exp.Add(-2*time.Millisecond - time.Duration(i)*296*time.Millisecond/340)
		case i < 400:
			r.ClosedAt = exp.Add(time.Duration(i-340) * 50 * time.Millisecond) // 0.05 to 2.95 s late
		case i < 403:
			r.ClosedAt, r.End = time.Time{}, EndClient
		}
		s.Add(r, to, true)
	}
	v := verdict(s)
	require.Len(t, v, 3, "%q", v)
	assert.Equal(t, "341 of 1000 closed EARLY, before their deadline counted from the last byte sent (the earliest the server saw activity): by p50 150ms, p99 295ms, max 298ms", v[0], "percentiles over the early ones")
	assert.Contains(t, v[1], "57 of 1000 closed late, after their deadline counted from the server's last answer")
	assert.Contains(t, v[1], "max 2.95s")
	assert.Equal(t, "3 of 1000 not closed within 10.00s of their deadline", v[2])
}

func TestScenario_AddDialErrorsAndSurvivors(t *testing.T) {
	s := NewScenario("keepalive", expectOf("keepalive"))
	s.Add(ConnResult{DialErr: "fd_limit"}, to, true)
	s.Add(ConnResult{Survivor: true, End: "client", Pings: 3}, to, false)
	s.Add(ConnResult{Survivor: true, End: "dead_peer", Pings: 1}, to, false)
	assert.Equal(t, 3, s.Conns)
	assert.Equal(t, 2, s.Opened)
	assert.Equal(t, 1, s.DialErrors["fd_limit"])
	assert.Equal(t, 2, s.Survivors)
	assert.Equal(t, 1, s.Survived)
	assert.Equal(t, 4, s.Pings)
	assert.Len(t, verdict(s), 2, "a dial error and a dead survivor")
}

func shard(name string, sent uint64, lat ...int64) *Result {
	s := NewScenario("echo", expectOf("echo"))
	s.Conns, s.Opened, s.Sent, s.Recv = 10, 10, sent, sent
	for _, v := range lat {
		s.Latency.Record(v)
	}
	return &Result{Version: Version, Shards: []string{name}, Start: t0, End: t0.Add(time.Second),
		Config: Config{Proto: "framed", Scenarios: []string{"echo"}, Timeouts: to}, Scenarios: []*Scenario{s}}
}

func TestMerge(t *testing.T) {
	a, b := shard("1/2", 100, 1e6, 2e6), shard("2/2", 50, 3e6)
	b.End = t0.Add(2 * time.Second)
	m, err := Merge(a, b)
	require.NoError(t, err)
	e := m.Scenario("echo")
	require.NotNil(t, e)
	assert.Equal(t, 20, e.Conns)
	assert.Equal(t, uint64(150), e.Sent)
	assert.Equal(t, uint64(3), e.Latency.Count())
	assert.Equal(t, int64(3e6), e.Latency.Max())
	assert.Equal(t, []string{"1/2", "2/2"}, m.Shards)
	assert.Equal(t, t0.Add(2*time.Second), m.End)
	assert.Equal(t, uint64(100), a.Scenario("echo").Sent, "inputs untouched")

	_, err = Merge(a, shard("1/2", 1))
	assert.ErrorIs(t, err, ErrMerge, "the same shard twice")
	c := shard("2/2", 1)
	c.Config.Timeouts.Idle = time.Second
	_, err = Merge(a, c)
	assert.ErrorIs(t, err, ErrMerge, "different timeouts")
	_, err = Merge()
	assert.ErrorIs(t, err, ErrMerge)
}

func TestJSONRoundTripAndRender(t *testing.T) {
	r := shard("1/1", 10, 5e5, 7e5)
	var buf bytes.Buffer
	require.NoError(t, JSON(&buf, r, r.Judge()))
	got, err := ReadJSON(&buf)
	require.NoError(t, err)
	assert.Equal(t, r.Scenario("echo").Latency.Quantile(0.5), got.Scenario("echo").Latency.Quantile(0.5))
	var txt, svg bytes.Buffer
	Text(&txt, got, got.Judge())
	assert.Contains(t, txt.String(), "[echo] ok")
	require.NoError(t, SVG(&svg, got))
	assert.True(t, strings.HasPrefix(svg.String(), "<svg"))
	assert.Contains(t, svg.String(), "p99")
	_, err = ReadJSON(strings.NewReader(`{"version":99}`))
	assert.Error(t, err)
}

func TestScenario_AddIdleAnswer(t *testing.T) {
	s := NewScenario("idle", expectOf("idle"))
	send := t0
	s.Add(ConnResult{Scenario: "idle", Role: "idle", Expect: "idle", End: "idle", ExpectedAt: send.Add(to.Idle),
		ExpectedBy: send.Add(to.Idle + 3*time.Millisecond), ClosedAt: send.Add(to.Idle + 5*time.Millisecond)}, to, true)
	s.Add(ConnResult{Scenario: "idle", Role: "idle", Expect: "idle", End: "idle", ExpectedAt: send.Add(to.Idle),
		ClosedAt: send.Add(to.Idle + 7*time.Millisecond)}, to, true) // no answer seen
	assert.Equal(t, uint64(2), s.Closes.FromStart.Count())
	require.Equal(t, uint64(2), s.Closes.FromEnd.Count(), "without an answer the window is the send")
	assert.Equal(t, int64(2*time.Millisecond), s.Closes.FromEnd.Min(), "close - (answer + idle)")
	assert.Equal(t, int64(3*time.Millisecond), s.Closes.Window.Max(), "answer - send")

	m, err := Merge(&Result{Version: Version, Shards: []string{"1/2"}, Scenarios: []*Scenario{s}},
		&Result{Version: Version, Shards: []string{"2/2"}, Scenarios: []*Scenario{s}})
	require.NoError(t, err)
	assert.Equal(t, uint64(4), m.Scenario("idle").Closes.FromEnd.Count(), "merged")
	assert.Equal(t, uint64(2), s.Closes.FromEnd.Count(), "inputs untouched")
	var b bytes.Buffer
	Text(&b, m, m.Judge())
	assert.Contains(t, b.String(), "close error from the server's last answer")
}

// TestText_LeakSpoilsTheVerdict: a suspected leak must not end the report
// with a plain "all ok".
func TestText_LeakSpoilsTheVerdict(t *testing.T) {
	r := shard("1/1", 10, 5e5, 7e5)
	var clean bytes.Buffer
	Text(&clean, r, r.Judge())
	assert.Contains(t, clean.String(), "scenario judged is ok\n")
	assert.NotContains(t, clean.String(), "leaked")
	r.Leaks = append(r.Leaks, "the server still has 3 connections open")
	var leaky bytes.Buffer
	Text(&leaky, r, r.Judge())
	assert.Contains(t, leaky.String(), "LEAK: the server still has 3 connections open")
	assert.Contains(t, leaky.String(), "; the server leaked (LEAK above)")
	assert.Equal(t, 1, r.Judge().ExitStatus())
}

func selfLag(late time.Duration, wakes int, others time.Duration) *SelfLag {
	l := &SelfLag{Lag: &hist.Histogram{}, Wall: 10 * time.Second, CPUs: 2, OwnCPU: time.Second, OtherCPU: others}
	for range wakes {
		l.Lag.Record(int64(late))
		l.Stalled += max(late-time.Millisecond, 0)
	}
	l.Stalled = min(l.Stalled, l.Wall)
	return l
}

func TestMergeAndJSON_SelfLag(t *testing.T) {
	a, b := shard("1/2", 10), shard("2/2", 10)
	a.SelfLag, b.SelfLag = selfLag(time.Millisecond, 100, 3*time.Second), selfLag(300*time.Millisecond, 10, 15*time.Second)
	m, err := Merge(a, b)
	require.NoError(t, err)
	require.NotNil(t, m.SelfLag)
	assert.Equal(t, uint64(110), m.SelfLag.Lag.Count())
	assert.Equal(t, int64(300*time.Millisecond), m.SelfLag.Lag.Max())
	assert.Equal(t, 18*time.Second, m.SelfLag.OtherCPU, "added up")
	assert.Equal(t, 20*time.Second, m.SelfLag.Wall, "added up, so that the stalled share is the shards' average")
	assert.Equal(t, uint64(100), a.SelfLag.Lag.Count(), "inputs untouched")

	var buf bytes.Buffer
	require.NoError(t, JSON(&buf, m, m.Judge()))
	assert.Contains(t, buf.String(), `"self_lag"`)
	got, err := ReadJSON(&buf)
	require.NoError(t, err)
	assert.Equal(t, m.SelfLag.Lag.Quantile(0.99), got.SelfLag.Lag.Quantile(0.99))
	assert.Equal(t, m.SelfLag.OtherCPU, got.SelfLag.OtherCPU)
	var txt bytes.Buffer
	Text(&txt, got, got.Judge())
	assert.Contains(t, txt.String(), "other processes 18.0 CPU-s")

	// Written before the lag was measured: none, and merges without it.
	old, err := ReadJSON(strings.NewReader(`{"version":2,"self_lag":{"wall":"1ns"}}`))
	require.NoError(t, err)
	assert.NotNil(t, old.SelfLag.Lag, "an absent histogram reads as empty")
	m, err = Merge(shard("1/1", 1))
	require.NoError(t, err)
	assert.Nil(t, m.SelfLag)
}
