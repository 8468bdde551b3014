package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/version"
	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/shard"
)

// TestMain lets the test binary stand in for loadtest, as a process of
// its own, when envAsMain is set.
func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		main() // exits with a status but for success
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRealMain_SaysWhereCompareWent(t *testing.T) {
	for _, sub := range []string{"compare", "serve"} {
		err := realMain(context.Background(), []string{sub}, io.Discard, io.Discard)
		require.ErrorIs(t, err, errUsage)
		assert.ErrorContains(t, err, "moved to the bench module")
	}
}

func TestRealMain_Version(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, realMain(context.Background(), []string{"-version"}, &out, io.Discard))
	assert.True(t, strings.HasPrefix(out.String(), "loadtest "+version.Release+" "), "got %q", out.String())
}

func TestParseFlags_Errors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "baselines are in bench", args: []string{"-server", "gnet"}, want: "-server"},
		{name: "bad addr", args: []string{"-addr", "localhost"}, want: "HOST:PORT"},
		{name: "bad proto", args: []string{"-proto", "http"}, want: "-proto"},
		{name: "framed-only scenario on raw", args: []string{"-proto", "raw", "-scenario", "keepalive"}, want: "needs -proto framed"},
		{name: "unknown scenario", args: []string{"-scenario", "echo,flood"}, want: "flood"},
		{name: "all with others", args: []string{"-scenario", "all,echo"}, want: "-scenario all means every scenario that applies"},
		{name: "scenario twice", args: []string{"-scenario", "echo,echo"}, want: "twice"},
		{name: "bad shard", args: []string{"-shard", "3/2"}, want: "-shard"},
		{name: "zero rate", args: []string{"-rate", "0"}, want: "-rate"},
		{name: "huge size", args: []string{"-size", "1000000"}, want: "-size"},
		{name: "zero duration", args: []string{"-duration", "0s"}, want: "-duration"},
		{name: "bad plot", args: []string{"-plot", "x.png"}, want: ".svg"},
		{name: "idle off", args: []string{"-scenario", "idle", "-idle", "0"}, want: "-idle"},
		{name: "keepalive slower than idle", args: []string{"-scenario", "keepalive", "-keepalive", "2s"}, want: "below -idle"},
		{name: "give-up after idle", args: []string{"-scenario", "retransmit", "-rto", "1s"}, want: "give-up"},
		{name: "stray argument", args: []string{"extra"}, want: "report"},
		{name: "negative spread", args: []string{"-idle-spread", "-1s"}, want: "-idle-spread"},
		{name: "spread beyond half the idle timeout", args: []string{"-scenario", "idle", "-idle", "1s", "-idle-spread", "600ms"}, want: "half of -idle"},
		{name: "pingflood on raw", args: []string{"-proto", "raw", "-scenario", "pingflood"}, want: "needs -proto framed"},
		{name: "connflood without a limit", args: []string{"-scenario", "connflood"}, want: "needs -max-conns"},
		{name: "connflood within the limit", args: []string{"-scenario", "connflood", "-max-conns", "100", "-flood-conns", "100"}, want: "more than -max-conns"},
		{name: "negative hostile count", args: []string{"-nonreader-conns", "-1"}, want: "-nonreader-conns -1 is negative"},
		{name: "negative count of the server", args: []string{"-max-retransmits", "-1"}, want: "-max-retransmits -1 is negative"},
		{name: "no connection for a chosen hostile scenario", args: []string{"-scenario", "garbage", "-garbage-conns", "0"}, want: "-garbage-conns 0: want at least 1"},
		{name: "bad byte size", args: []string{"-output-limit", "4 lots"}, want: "byte count"},
		{name: "no hostile bytes", args: []string{"-hostile-bytes", "0"}, want: "-hostile-bytes"},
		{name: "server pid without addr", args: []string{"-server-pid", "1"}, want: "needs -addr"},
		{name: "horizon within the slack", args: []string{"-slack", "1s", "-close-horizon", "500ms"}, want: "-close-horizon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseFlags_Defaults(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, attack.Framed, o.Proto)
	assert.Equal(t, []string{"echo", "idle", "keepalive", "retransmit", "slowloris", "churn", "nonreader", "splitter", "pingflood", "garbage"}, o.Scenarios,
		"every scenario but connflood, which needs the server's connection limit")
	o, err = parseFlags([]string{"-max-conns", "3000"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, slices.DeleteFunc(slices.Clone(scenario.Names()), func(s string) bool { return s == scenario.Handshake || s == scenario.Sourceflood }), o.Scenarios,
		"with a limit, connflood too (handshake needs -handshake; sourceflood -proxy and -max-conns-per-source)")
	assert.Equal(t, 3200, *o.hostileConns[scenario.Connflood], "200 beyond the limit")
	o, err = parseFlags([]string{"-addr", "127.0.0.1:1", "-scenario", "idle,echo", "-shard", "2/3"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, attack.Raw, o.Proto)
	assert.Equal(t, []string{"echo", "idle"}, o.Scenarios, "report order")
	assert.Equal(t, shard.Shard{I: 1, N: 3}, o.shard)
	o, err = parseFlags([]string{"-addr", "127.0.0.1:1", "-idle", "3s", "-max-retransmits", "0"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, &report.Timeouts{Idle: 3 * time.Second, Slack: 500 * time.Millisecond}, o.known, "known: only what the flags gave, and the slack")
	o, err = parseFlags([]string{"-addr", "127.0.0.1:1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"echo", "idle", "churn", "nonreader", "splitter"}, o.Scenarios, "raw: only what applies (no framed-only scenarios, no garbage)")
	all, err := parseFlags([]string{"-addr", "127.0.0.1:1", "-scenario", "all"}, io.Discard)
	require.NoError(t, err, "-scenario all, as -h says")
	assert.Equal(t, o.Scenarios, all.Scenarios, "all is the default set")
}

// TestParseFlags_Nonsense: numbers no run can use are usage errors, found
// before the run, and so is a result file that cannot be written.
func TestParseFlags_Nonsense(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no connections", args: []string{"-conns", "0"}, want: "-conns 0: want 1 to 1000000"},
		{name: "absurd idle", args: []string{"-idle", "1000000h"}, want: "-idle 1000000h0m0s: want 0 to 1h0m0s"},
		{name: "negative slack", args: []string{"-slack", "-1s"}, want: "-slack -1s: want 0 to 1h0m0s"},
		{name: "absurd horizon", args: []string{"-close-horizon", "100h"}, want: "at most 1h0m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			require.ErrorIs(t, err, errUsage)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	for _, bad := range [][]string{{"-json", "/nonexistent/dir/r.json"}, {"-plot", "/nonexistent/dir/r.svg"}} {
		start := time.Now()
		err := realMain(context.Background(), append(bad, "-duration", "10s"), io.Discard, io.Discard)
		require.ErrorIs(t, err, errUsage, "a result path that cannot be written is found before the run")
		assert.Contains(t, err.Error(), bad[1])
		assert.Less(t, time.Since(start), time.Second, "before the run")
	}
	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, checkOutputs(path, ""))
	assert.NoFileExists(t, path, "checked, not left behind before the run")
}

func TestQuietBounds(t *testing.T) {
	tests := []struct {
		name                string
		idle, spread        time.Duration
		spreadSet           bool
		wantBarrier, wantSp time.Duration
	}{
		{name: "long idle: default spread and 10s barrier", idle: 20 * time.Second, spread: time.Second, wantBarrier: 10 * time.Second, wantSp: time.Second},
		{name: "huge idle: barrier capped at 10s", idle: time.Hour, spread: time.Second, wantBarrier: 10 * time.Second, wantSp: time.Second},
		{name: "short idle caps the default spread, not the barrier (keep-alives)", idle: 400 * time.Millisecond, spread: time.Second, wantBarrier: 10 * time.Second, wantSp: 100 * time.Millisecond},
		{name: "explicit spread is kept", idle: 400 * time.Millisecond, spread: 150 * time.Millisecond, spreadSet: true, wantBarrier: 10 * time.Second, wantSp: 150 * time.Millisecond},
		{name: "no idle timeout", idle: 0, spread: time.Second, wantBarrier: 10 * time.Second, wantSp: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, sp := quietBounds(tt.idle, tt.spread, tt.spreadSet)
			assert.Equal(t, tt.wantBarrier, b)
			assert.Equal(t, tt.wantSp, sp)
		})
	}
	o, err := parseFlags([]string{"-scenario", "idle", "-idle", "20s"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, time.Second, o.IdleSpread, "-idle-spread defaults to 1s")
	assert.Equal(t, 10*time.Second, o.BarrierTimeout)
}

func TestMakePlan_Limits(t *testing.T) {
	o, err := parseFlags([]string{"-scenario", "echo,idle", "-conns", "6000"}, io.Discard)
	require.NoError(t, err)
	p := makePlan(o, 20000, 28000, true)
	got := p.conns["echo"] + p.conns["idle"]
	assert.LessOrEqual(t, 2*got, 20000-100, "client and server ends fit in the fd limit")
	assert.Greater(t, got, 9000)
	require.Len(t, p.limits, 1)
	assert.Contains(t, p.limits[0], "-addr")

	o.Addr = "127.0.0.1:9"
	o.conns = 40000
	p = makePlan(o, 1<<20, 28000, true)
	assert.Equal(t, 40000, p.conns["echo"])
	assert.Len(t, p.sources, 4, "80000 conns over 25200 usable ports per source")
	assert.Empty(t, p.limits)
	p = makePlan(o, 1<<20, 28000, false)
	assert.Empty(t, p.sources, "only loopback gets extra sources")
	require.Len(t, p.limits, 1)
	assert.Contains(t, p.limits[0], "ephemeral ports")

	o.shard = shard.Shard{I: 1, N: 2}
	p = makePlan(o, 1<<20, 1<<20, true)
	assert.Equal(t, 20000, p.conns["echo"])

	o, err = parseFlags([]string{"-scenario", "connflood", "-max-conns", "3000"}, io.Discard)
	require.NoError(t, err)
	p = makePlan(o, 1000, 28000, true)
	assert.Equal(t, 450, p.conns[scenario.Connflood], "the flood runs alone, within (1000-100)/2 open files")
	require.Len(t, p.limits, 1)
	assert.Contains(t, p.limits[0], "connflood opened 450 of the 3200 connections requested")
}

// e2e runs the harness with args and returns the result it wrote.
func e2e(t *testing.T, args ...string) (*report.Result, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.json")
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runErr := realMain(ctx, append(args, "-q", "-json", path), &out, io.Discard)
	if !errors.Is(runErr, errJudged) && !errors.Is(runErr, errStarved) {
		require.NoError(t, runErr)
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := report.ReadJSON(f)
	require.NoError(t, err)
	// The exit status (1 for errJudged, 3 for errStarved) says what the
	// report's last line says.
	assert.Equal(t, r.Judge().Failures > 0, errors.Is(runErr, errJudged), "run error %v, report:\n%s", runErr, out.String())
	assert.Equal(t, r.Judge().Failures == 0 && r.Judge().NotJudged > 0, errors.Is(runErr, errStarved), "run error %v, report:\n%s", runErr, out.String())
	require.NotNil(t, r.SelfLag, "the harness measured its own lag")
	assert.Positive(t, r.SelfLag.Lag.Count())
	// loadtest report of the result exits as the run did.
	repErr := realMain(ctx, []string{"report", path}, io.Discard, io.Discard)
	assert.Equal(t, errors.Is(runErr, errJudged), errors.Is(repErr, errJudged), "run error %v, report error %v", runErr, repErr)
	assert.Equal(t, errors.Is(runErr, errStarved), errors.Is(repErr, errStarved), "run error %v, report error %v", runErr, repErr)
	if runErr == nil {
		assert.NoError(t, repErr)
	}
	return r, out.String()
}

// starved reports whether the harness of run r lost, in all, at least
// within to the machine (its own measure, SelfLag.Stalled): then a peer
// that had to answer within that long may not have, and a server's timer
// may have fired before it read what was to reset it.
func starved(r *report.Result, within time.Duration) bool {
	return r.SelfLag != nil && r.SelfLag.Stalled >= within
}

// checkReaped asserts the figures of a timer scenario make sense: never
// early, always closed, and late by at most slack plus twice what the
// harness lost to the machine. Every connection is reaped for the right
// reason unless the harness lost at least within (starved): then some may
// have been closed as dead peers, their pings unanswered in time, but for
// no other reason.
func checkReaped(t *testing.T, r *report.Result, name string, slack, within time.Duration) {
	t.Helper()
	s := r.Scenario(name)
	require.NotNil(t, s)
	assert.Zero(t, s.Closes.Early, "%s: early closes", s.Name)
	assert.Zero(t, s.Closes.Never, "%s", s.Name)
	assert.GreaterOrEqual(t, s.Closes.FromStart.Min(), -int64(time.Millisecond), "%s", s.Name)
	assert.LessOrEqual(t, s.Closes.FromStart.Max(), int64(slack+2*r.SelfLag.Stalled), "%s: lost to the machine %v", s.Name, r.SelfLag.Stalled)
	if !starved(r, within) {
		assert.Equal(t, s.Opened, s.Closes.Expected, "%s: every connection expects a close", s.Name)
		assert.Equal(t, s.Closes.Expected, s.Closes.OnTime+s.Closes.Late, "%s: all reaped for the right reason", s.Name)
		return
	}
	assert.Positive(t, s.Closes.OnTime+s.Closes.Late, "%s: reaped for the right reason", s.Name)
	for reason := range s.Closes.OtherReason {
		assert.Equal(t, "dead_peer", reason, "%s: closed for another reason than the harness's lateness explains", s.Name)
	}
}

// TestEndToEnd_External drives a server in the test's process through
// -addr, as any server a user runs.
func TestEndToEnd_External(t *testing.T) {
	addr := startPlainEcho(t, 300*time.Millisecond)
	r, out := e2e(t, "-addr", addr, "-scenario", "echo,idle", "-conns", "30",
		"-duration", "1s", "-rate", "50", "-idle", "300ms", "-slack", "250ms")
	e := r.Scenario("echo")
	require.NotNil(t, e)
	assert.Equal(t, 30, e.Opened)
	assert.Equal(t, e.Sent, e.Recv)
	assert.Zero(t, e.Lost)
	// Open loop sends its schedule, conns x rate x duration, but for the
	// sends due while the harness was kept off the CPU.
	lost := r.SelfLag.Stalled
	assert.InDelta(t, 30*50, float64(e.Sent), 30*50*(0.1+2*lost.Seconds()), "open loop sends its schedule (lost to the machine: %v)", lost)
	assert.Equal(t, e.Recv, e.Latency.Count())
	assert.Positive(t, e.Latency.Quantile(0.5))
	assert.Less(t, e.Latency.Quantile(0.5), int64(250*time.Millisecond+2*lost))
	checkReaped(t, r, "idle", 250*time.Millisecond, 250*time.Millisecond)
	assert.Nil(t, r.Server, "an external server's own counts are not known")
	assert.Contains(t, out, "all 2 scenarios judged are ok")
}

func TestEndToEnd_ServerWithoutTimersNeverReaps(t *testing.T) {
	addr := startPlainEcho(t, 0)
	r, out := e2e(t, "-addr", addr, "-scenario", "idle", "-conns", "10", "-duration", "200ms",
		"-idle", "200ms", "-slack", "100ms", "-close-horizon", "400ms")
	s := r.Scenario("idle")
	assert.Equal(t, 10, s.Closes.Never, "a server without timers never reaps")
	assert.Equal(t, 400*time.Millisecond, s.Horizon)
	if r.Judge().NotJudged == 0 { // else the machine starved the harness: exit status 3, checked by e2e
		assert.Contains(t, out, "CHECK")
	}
	assert.Contains(t, out, "10 of 10 not closed within 400ms of their deadline")
}

func TestEndToEnd_Netwheel(t *testing.T) {
	r, out := e2e(t, "-scenario", "echo,idle,keepalive,retransmit,slowloris,churn", "-conns", "20", "-duration", "1s", "-idle", "600ms", "-keepalive", "150ms",
		"-keepalive-timeout", "150ms", "-frame-timeout", "300ms", "-rto", "50ms", "-min-rto", "20ms",
		"-max-retransmits", "2", "-churn-rate", "20", "-slack", "300ms")
	// A harness that lost the keepalive timeout to the machine may have left
	// a ping unanswered: its connection is then closed as a dead peer.
	const within = 150 * time.Millisecond
	e := r.Scenario("echo")
	require.NotNil(t, e)
	if !starved(r, within) {
		assert.Equal(t, e.Sent, e.Recv, out)
	} else {
		assert.Positive(t, e.Recv, out)
	}
	idle := r.Scenario("idle")
	checkReaped(t, r, "idle", 300*time.Millisecond, within)
	assert.Equal(t, uint64(idle.Closes.Expected), idle.Closes.FromEnd.Count(), "framed: every idle connection's ACK was seen")
	assert.GreaterOrEqual(t, idle.Closes.Window.Min(), int64(0), "the ACK comes after the send")
	assert.LessOrEqual(t, idle.Closes.FromEnd.Max(), idle.Closes.FromStart.Max(), "measured from the later ACK, the error is smaller")
	assert.Contains(t, out, "close error from the server's last answer")
	assert.Contains(t, out, "quiet connections: all 30 open", "20 idle and 10 silent wait at the barrier")
	checkReaped(t, r, "slowloris", 300*time.Millisecond, within)
	checkReaped(t, r, "retransmit", 300*time.Millisecond, within)
	rt := r.Scenario("retransmit")
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 150 * time.Millisecond}, rt.Ladder)
	assert.Equal(t, 350*time.Millisecond, rt.GiveUpAt)
	if !starved(r, within) { // else a connection may end as a dead peer before its second
		require.Len(t, rt.RetxError, 2, "two retransmissions seen")
	}
	for _, h := range rt.RetxError {
		assert.GreaterOrEqual(t, h.Min(), -int64(time.Millisecond))
	}
	k := r.Scenario("keepalive")
	assert.Equal(t, 10, k.Survivors)
	assert.Positive(t, k.Pings)
	if !starved(r, within) {
		assert.Equal(t, 10, k.Survived, "survivors answer pings and stay")
		assert.Equal(t, 10, k.Closes.OnTime, "silent ones are closed as dead peers")
	} else {
		assert.Positive(t, k.Closes.OnTime, "silent ones are closed as dead peers")
	}
	assert.Zero(t, r.Server.Open)
	assert.Zero(t, r.Server.TimersPending)
	require.NotNil(t, r.CloseDelay, "netserver's own close delay")
	timeouts := r.Server.Closes["idle"] + r.Server.Closes["keepalive"] + r.Server.Closes["dead_peer"] + r.Server.Closes["frame_deadline"]
	assert.Positive(t, timeouts)
	assert.Equal(t, uint64(timeouts), r.CloseDelay.Count, "one per timeout close (retransmission give-ups are not timeouts): %v", r.Server.Closes)
	assert.Contains(t, out, "timeout closes of every scenario", "the close delay counts the other timer scenarios too")

	// Idle alone: the server saw exactly the idle reaps the clients saw.
	r, out = e2e(t, "-scenario", "idle", "-conns", "20", "-duration", "200ms", "-idle", "200ms", "-slack", "200ms")
	idle = r.Scenario("idle")
	checkReaped(t, r, "idle", 200*time.Millisecond, 200*time.Millisecond)
	cd := r.CloseDelay
	require.NotNil(t, cd, out)
	assert.Equal(t, "netwheel_timeout_close_delay_seconds", cd.Metric)
	assert.Equal(t, uint64(idle.Closes.OnTime), cd.Count, "one close delay per idle reap")
	p99, ok := cd.Quantile(0.99)
	require.True(t, ok)
	assert.GreaterOrEqual(t, p99, 0.0)
	assert.LessOrEqual(t, cd.Mean(), (200*time.Millisecond + 2*r.SelfLag.Stalled).Seconds(), "within the slack the clients saw")
	assert.Regexp(t, `\n  server's own close delay \(from its deadline to its close call, netwheel_timeout_close_delay_seconds\): 20 timeout closes, p50 <= \S+, p99 <= \S+, max <= \S+, mean \S+\n`, out)
}

func TestReportCmd_MergesShards(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i := 1; i <= 2; i++ {
		path := filepath.Join(dir, "s"+string(rune('0'+i))+".json")
		var out bytes.Buffer
		requireRan(t, realMain(context.Background(), []string{"-proto", "raw", "-scenario", "echo",
			"-conns", "5", "-duration", "300ms", "-shard", string(rune('0'+i)) + "/2", "-q", "-json", path}, &out, io.Discard))
		files = append(files, path)
	}
	var out bytes.Buffer
	plot := filepath.Join(dir, "p.html")
	requireRan(t, realMain(context.Background(), append([]string{"report", "-plot", plot}, files...), &out, io.Discard))
	assert.Contains(t, out.String(), "shards: 1/2, 2/2")
	assert.Contains(t, out.String(), "5/5 connections opened", "3 + 2 connections")
	b, err := os.ReadFile(plot)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), "<svg"))

	err = realMain(context.Background(), []string{"report", files[0], files[0]}, &out, io.Discard)
	assert.ErrorIs(t, err, report.ErrMerge)
	err = realMain(context.Background(), []string{"report"}, &out, io.Discard)
	assert.ErrorIs(t, err, errUsage)
}

// requireRan fails the test unless err is nil or errStarved: the run (or
// the merge, whose exit status is the merged verdict's) passed, or a busy
// machine starved the harness and it said so.
func requireRan(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, errStarved) {
		require.NoError(t, err)
	}
}
