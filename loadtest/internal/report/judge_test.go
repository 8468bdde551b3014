package report

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// judgeTimeouts are the server timeouts of the judging tests: the
// harness's defaults.
var judgeTimeouts = Timeouts{Idle: 3 * time.Second, KeepaliveTime: 500 * time.Millisecond, KeepaliveTimeout: 500 * time.Millisecond,
	Tick: time.Millisecond, Slack: 500 * time.Millisecond}

// neverClosed, returned by idleRun's late, says the connection was never
// closed: the harness gave up at the 10 s horizon.
const neverClosed = time.Duration(math.MinInt64)

// idleRun returns a run of n idle connections over raw, connection i
// closed late by late(i) after its deadline (negative: early), with the
// harness's lag l.
func idleRun(n int, late func(i int) time.Duration, l *SelfLag) *Result {
	s := NewScenario("idle", expectOf("idle"))
	s.Proto, s.Horizon, s.AnswerWait = "raw", 10*time.Second, 2*time.Second
	exp := t0.Add(3 * time.Second)
	for i := range n {
		r := ConnResult{Expect: "idle", ExpectedAt: exp, End: "eof"}
		if d := late(i); d != neverClosed {
			r.ClosedAt = exp.Add(d)
		} else {
			r.End = EndClient
		}
		s.Add(r, judgeTimeouts, true)
	}
	return &Result{Version: Version, Config: Config{Target: "127.0.0.1:6379", Proto: "raw", Scenarios: []string{"idle"}, Timeouts: judgeTimeouts},
		Scenarios: []*Scenario{s}, SelfLag: l}
}

// remote moves r's server to another machine.
func remote(r *Result) *Result {
	r.Config.Target = "192.0.2.7:6379"
	return r
}

// redisLate is Redis's idle sweep, as measured: 1.3 s late at the median,
// 3.9 s at p99.
func redisLate(i int) time.Duration {
	switch {
	case i < 500:
		return time.Duration(900+i) * time.Millisecond
	case i < 990:
		return time.Duration(1300+5*(i-500)) * time.Millisecond
	}
	return 3900 * time.Millisecond
}

func TestResult_JudgeStarvation(t *testing.T) {
	quiet := selfLag(time.Millisecond, 1000, time.Second)            // p99 1 ms, others 1 of 20 CPU-s
	starved := selfLag(400*time.Millisecond, 25, 19*time.Second)     // p99 400 ms, kept waiting 9.98 s of 10 s
	longStarved := selfLag(400*time.Millisecond, 25, 19*time.Second) // the same, over a run long enough to lose 10 s
	longStarved.Wall, longStarved.Stalled = 12*time.Second, 11*time.Second
	selfBusy := selfLag(400*time.Millisecond, 25, 2*time.Second)      // as starved, but by its own work: others 2 of 20 CPU-s
	smallStalls := selfLag(10*time.Millisecond, 1000, 19*time.Second) // kept waiting 9 s, by 10 ms each: p99 10 ms
	busy := selfLag(100*time.Millisecond, 40, 8*time.Second)          // kept waiting 40%, others 8 of 20 CPU-s: a shared machine at work
	lightlyBusy := selfLag(100*time.Millisecond, 15, 4*time.Second)   // kept waiting 15%, others 4 of 20 CPU-s: a few hiccups
	noProc := selfLag(400*time.Millisecond, 25, 19*time.Second)
	noProc.Err = "no /proc"
	onTime := func(int) time.Duration { return 2 * time.Millisecond }
	never := func(int) time.Duration { return neverClosed }
	tests := []struct {
		name          string
		r             *Result
		wantFailures  int
		wantNotJudged int
	}{
		{name: "a correct server on a quiet machine", r: idleRun(1000, onTime, quiet)},
		{name: "a correct server, no lag figures (an old result)", r: idleRun(1000, onTime, nil)},
		{name: "late on a quiet machine: failed", r: idleRun(1000, redisLate, quiet), wantFailures: 1},
		{name: "833 ms late on a busy machine that lost more: not judged", r: idleRun(100, func(int) time.Duration { return 833 * time.Millisecond }, busy), wantNotJudged: 1},
		{name: "833 ms late beside a few hiccups: failed", r: idleRun(100, func(int) time.Duration { return 833 * time.Millisecond }, lightlyBusy), wantFailures: 1},
		{name: "late, the harness starved long enough: not judged", r: idleRun(1000, redisLate, starved), wantNotJudged: 1},
		{name: "never on a quiet machine: failed", r: idleRun(100, never, quiet), wantFailures: 1},
		{name: "never, the harness lost less than the horizon: failed", r: idleRun(100, never, starved), wantFailures: 1},
		{name: "never, the harness lost more than the horizon: not judged", r: idleRun(100, never, longStarved), wantNotJudged: 1},
		{name: "late beyond all the harness lost: failed", r: idleRun(10, func(int) time.Duration { return 30 * time.Second }, starved), wantFailures: 1},
		{name: "the harness kept waiting by its own work: failed", r: idleRun(1000, redisLate, selfBusy), wantFailures: 1},
		{name: "stalls small against the slack: failed", r: idleRun(1000, redisLate, smallStalls), wantFailures: 1},
		{name: "no CPU figures: failed", r: idleRun(1000, redisLate, noProc), wantFailures: 1},
		{name: "early on a quiet machine: failed", r: idleRun(10, func(int) time.Duration { return -300 * time.Millisecond }, quiet), wantFailures: 1},
		{name: "early, a server on the starved machine: not judged", r: idleRun(10, func(int) time.Duration { return -300 * time.Millisecond }, starved), wantNotJudged: 1},
		{name: "early, a server elsewhere: failed, the harness's lateness never makes a close early",
			r: remote(idleRun(10, func(int) time.Duration { return -300 * time.Millisecond }, starved)), wantFailures: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantFailures, tt.r.Judge().Failures, "failures")
			assert.Equal(t, tt.wantNotJudged, tt.r.Judge().NotJudged, "not judged")
			var txt bytes.Buffer
			Text(&txt, tt.r, tt.r.Judge())
			switch {
			case tt.wantFailures > 0:
				assert.Contains(t, txt.String(), "[idle] CHECK")
			case tt.wantNotJudged > 0:
				assert.Contains(t, txt.String(), "[idle] not judged")
				assert.Contains(t, txt.String(), "not judged: the load generator was starved (lag p99 ")
				assert.Contains(t, txt.String(), "\nno scenario judged; 1 not judged (idle): the load generator was starved")
			default:
				assert.Contains(t, txt.String(), "the 1 scenario judged is ok")
			}
		})
	}
}

// TestResult_JudgeKeepsHardChecks: in a starved run, a check no lateness
// explains (a wrong echo) still fails its scenario, beside the checks of
// timing that are not judged.
func TestResult_JudgeKeepsHardChecks(t *testing.T) {
	r := idleRun(1000, redisLate, selfLag(400*time.Millisecond, 25, 19*time.Second))
	s := r.Scenarios[0]
	s.Mismatch = 3
	s.Lost = 5
	failed, nj := judgeOne(r, s)
	require.Len(t, failed, 1)
	assert.Equal(t, "3 answers differed from what was expected", failed[0].Line)
	require.Len(t, nj, 2, "the lost messages and the late closes")
	assert.Contains(t, nj[0].Line, "5 messages never answered")
	assert.Contains(t, nj[1].Line, "closed late, after their deadline counted from the server's last answer")
	assert.Equal(t, 1, r.Judge().Failures)
	assert.Zero(t, r.Judge().NotJudged, "a scenario that failed is not 'not judged'")

	var txt bytes.Buffer
	Text(&txt, r, r.Judge())
	assert.Contains(t, txt.String(), "  ! 3 answers differed")
	assert.Contains(t, txt.String(), "  ~ 5 messages never answered")
}

// TestResult_JudgeMissedPings: a framed connection the server closed as a
// dead peer before its idle deadline, because the starved harness did not
// answer its pings, is the harness's lateness; on a quiet machine the same
// is a failure.
func TestResult_JudgeMissedPings(t *testing.T) {
	mk := func(l *SelfLag) *Result {
		s := NewScenario("idle", expectOf("idle"))
		s.Proto = "framed"
		exp := t0.Add(3 * time.Second)
		s.Add(ConnResult{Expect: "idle", ExpectedAt: exp, End: "dead_peer", ClosedAt: exp.Add(-2 * time.Second)}, judgeTimeouts, true)
		s.Add(ConnResult{Expect: "idle", ExpectedAt: exp, End: "idle", ClosedAt: exp}, judgeTimeouts, true)
		require.Equal(t, 1, s.Closes.EarlyDeadPeer)
		return &Result{Version: Version, Config: Config{Proto: "framed", Timeouts: judgeTimeouts}, Scenarios: []*Scenario{s}, SelfLag: l}
	}
	r := mk(selfLag(400*time.Millisecond, 25, 19*time.Second))
	failed, nj := judgeOne(r, r.Scenarios[0])
	assert.Empty(t, failed)
	require.Len(t, nj, 1)
	assert.Contains(t, nj[0].Line, "1 of 2 closed as dead peers before their deadline")
	r = mk(selfLag(time.Millisecond, 1000, time.Second))
	assert.Equal(t, 1, r.Judge().Failures)
}

func TestJSON_Judgement(t *testing.T) {
	r := idleRun(1000, redisLate, selfLag(400*time.Millisecond, 25, 19*time.Second))
	var buf bytes.Buffer
	require.NoError(t, JSON(&buf, r, r.Judge()))
	assert.Nil(t, r.Judgement, "JSON does not modify its result")
	assert.Contains(t, buf.String(), `"tolerance": "500ms"`, "a duration is a Go duration string")
	read, err := ReadJSON(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	j := read.Judge()
	assert.Equal(t, 0, j.Failures)
	assert.Equal(t, 1, j.NotJudged)
	assert.Contains(t, j.Starved, "the load generator was starved")
	assert.Equal(t, StatusNotJudged, j.Scenario("idle").Status)
	require.Len(t, j.Scenario("idle").NotJudged, 1)
	assert.Equal(t, 500*time.Millisecond, j.Scenario("idle").NotJudged[0].Tolerance)

	got, err := ReadJSON(&buf)
	require.NoError(t, err)
	assert.Nil(t, got.Judgement, "read back, the figures judge again")
	assert.Equal(t, 1, got.Judge().NotJudged)
}

// TestResult_JudgeGarbageClosedAsDeadPeer: a garbage connection the server
// closed as a dead peer (the harness answered no ping in time) is timing,
// not a wrong reason, when the harness was starved.
func TestResult_JudgeGarbageClosedAsDeadPeer(t *testing.T) {
	s := hostile("garbage")
	s.Proto = "framed"
	s.Add(ConnResult{Role: "random", Misbehaved: t0, ClosedAt: t0.Add(time.Second), End: "dead_peer"}, judgeTimeouts, true)
	s.Add(ConnResult{Role: "bad_type", Misbehaved: t0, ClosedAt: t0.Add(time.Millisecond), End: "protocol_error"}, judgeTimeouts, true)
	r := &Result{Version: Version, Config: Config{Proto: "framed", Timeouts: judgeTimeouts}, Scenarios: []*Scenario{s},
		SelfLag: selfLag(400*time.Millisecond, 25, 19*time.Second)}
	failed, nj := judgeOne(r, s)
	assert.Empty(t, failed)
	require.Len(t, nj, 1)
	assert.Contains(t, nj[0].Line, "1 garbage connections closed as dead peers")
	r.SelfLag = selfLag(time.Millisecond, 1000, time.Second)
	assert.Equal(t, 1, r.Judge().Failures, "on a quiet machine a dead-peer close of a garbage connection fails")
}

// TestResult_JudgeFloodNotClosed: ping flooders the server did not close
// within the window: a failure on a quiet machine, not judged on a starved
// one, where the harness could not flood, nor the server read, in time.
func TestResult_JudgeFloodNotClosed(t *testing.T) {
	mk := func(l *SelfLag) *Result {
		s := hostile("pingflood")
		s.Proto, s.CloseWithin = "framed", 5300*time.Millisecond
		for range 4 {
			s.Add(ConnResult{Role: "reading", Misbehaved: t0, End: EndClient}, judgeTimeouts, true)
		}
		return &Result{Version: Version, Config: Config{Proto: "framed", Timeouts: judgeTimeouts}, Scenarios: []*Scenario{s}, SelfLag: l}
	}
	r := mk(selfLag(time.Millisecond, 1000, time.Second))
	assert.Equal(t, 1, r.Judge().Failures)
	r = mk(selfLag(100*time.Millisecond, 100, 19*time.Second)) // p99 100 ms, kept waiting 9.9 s
	assert.Zero(t, r.Judge().Failures)
	assert.Equal(t, 1, r.Judge().NotJudged)
}
