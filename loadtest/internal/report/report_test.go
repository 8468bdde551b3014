package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

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
		r           ConnResult
		reaped      int
		never       int
		early       int
		wrongReason string
	}{
		{name: "on time", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(3 * time.Millisecond)}, reaped: 1},
		{name: "half a tick early is tolerated", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(-500 * time.Microsecond)}, reaped: 1},
		{name: "early", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(-2 * time.Millisecond)}, reaped: 1, early: 1},
		{name: "too late counts as never", r: ConnResult{End: "idle", Expect: "idle", ExpectedAt: exp, ClosedAt: exp.Add(101 * time.Millisecond)}, never: 1},
		{name: "never closed", r: ConnResult{End: "client", Expect: "idle", ExpectedAt: exp}, never: 1},
		{name: "raw eof counts as idle", r: ConnResult{End: "eof", Expect: "idle", ExpectedAt: exp, ClosedAt: exp}, reaped: 1},
		{name: "wrong reason", r: ConnResult{End: "dead_peer", Expect: "idle", ExpectedAt: exp, ClosedAt: exp}, wrongReason: "dead_peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScenario("idle")
			s.Add(tt.r, to)
			assert.Equal(t, 1, s.Expected)
			assert.Equal(t, tt.reaped, s.Reaped, "reaped")
			assert.Equal(t, tt.never, s.NeverReaped, "never")
			assert.Equal(t, tt.early, s.Early, "early")
			if tt.wrongReason != "" {
				assert.Equal(t, 1, s.WrongReason[tt.wrongReason])
			}
			if !tt.r.ClosedAt.IsZero() {
				assert.Equal(t, int64(tt.r.ClosedAt.Sub(exp)), s.ReapError.Max())
			}
		})
	}
}

func TestScenario_AddDialErrorsAndSurvivors(t *testing.T) {
	s := NewScenario("keepalive")
	s.Add(ConnResult{DialErr: "fd_limit"}, to)
	s.Add(ConnResult{Survivor: true, End: "client", Pings: 3}, to)
	s.Add(ConnResult{Survivor: true, End: "dead_peer", Pings: 1}, to)
	assert.Equal(t, 3, s.Conns)
	assert.Equal(t, 2, s.Opened)
	assert.Equal(t, 1, s.DialErrors["fd_limit"])
	assert.Equal(t, 2, s.Survivors)
	assert.Equal(t, 1, s.Survived)
	assert.Equal(t, 4, s.Pings)
	assert.Len(t, s.Verdict(), 2, "a dial error and a dead survivor")
}

func shard(name string, sent uint64, lat ...int64) *Result {
	s := NewScenario("echo")
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
	require.NoError(t, JSON(&buf, r))
	got, err := ReadJSON(&buf)
	require.NoError(t, err)
	assert.Equal(t, r.Scenario("echo").Latency.Quantile(0.5), got.Scenario("echo").Latency.Quantile(0.5))
	var txt, svg bytes.Buffer
	Text(&txt, got)
	assert.Contains(t, txt.String(), "[echo] ok")
	require.NoError(t, SVG(&svg, got))
	assert.True(t, strings.HasPrefix(svg.String(), "<svg"))
	assert.Contains(t, svg.String(), "p99")
	_, err = ReadJSON(strings.NewReader(`{"version":99}`))
	assert.Error(t, err)
}

func TestScenario_AddIdleAnswer(t *testing.T) {
	s := NewScenario("idle")
	send := t0
	s.Add(ConnResult{Scenario: "idle", Role: "idle", Expect: "idle", End: "idle", ExpectedAt: send.Add(to.Idle),
		AckedAt: send.Add(3 * time.Millisecond), ClosedAt: send.Add(to.Idle + 5*time.Millisecond)}, to)
	s.Add(ConnResult{Scenario: "idle", Role: "idle", Expect: "idle", End: "idle", ExpectedAt: send.Add(to.Idle),
		ClosedAt: send.Add(to.Idle + 7*time.Millisecond)}, to) // no answer seen
	assert.Equal(t, uint64(2), s.ReapError.Count())
	require.Equal(t, uint64(1), s.ReapErrorAck.Count(), "only connections with an answer")
	assert.Equal(t, int64(2*time.Millisecond), s.ReapErrorAck.Max(), "close - (answer + idle)")
	assert.Equal(t, int64(3*time.Millisecond), s.AckDelay.Max(), "answer - send")

	m, err := Merge(&Result{Version: Version, Shards: []string{"1/2"}, Scenarios: []*Scenario{s}},
		&Result{Version: Version, Shards: []string{"2/2"}, Scenarios: []*Scenario{s}})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), m.Scenario("idle").ReapErrorAck.Count(), "merged")
	var b bytes.Buffer
	Text(&b, m)
	assert.Contains(t, b.String(), "close error from the server's answer")
}

// TestText_LeakSpoilsTheVerdict: a suspected leak must not end the report
// with a plain "all ok".
func TestText_LeakSpoilsTheVerdict(t *testing.T) {
	r := shard("1/1", 10, 5e5, 7e5)
	var clean bytes.Buffer
	Text(&clean, r)
	assert.Contains(t, clean.String(), "scenarios ok\n")
	assert.NotContains(t, clean.String(), "leaked")
	r.Limits = append(r.Limits, "LEAK? the server still has 3 connections open")
	var leaky bytes.Buffer
	Text(&leaky, r)
	assert.Contains(t, leaky.String(), "but the server may have leaked")
}
