package main

import (
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

func TestMemoryBound(t *testing.T) {
	o, err := parseFlags([]string{"-conns", "100", "-churn-rate", "50"}, io.Discard)
	require.NoError(t, err)
	p := makePlan(o, 1<<20, 28000, true)
	b := o.bound.For(p.conns, p.churnOpen, p.neighbours, o.Proto == attack.Framed)
	assert.Equal(t, int64(4<<20), b.OutputLimit)
	assert.Equal(t, int64(1<<20), b.UnackedLimit, "framed: unacknowledged payload too")
	assert.Equal(t, map[string]int{"nonreader": 4, "pingflood": 4}, b.Filling)
	assert.Equal(t, 5*100+churnConns(50)+20+3, b.Other, "five polite scenarios, churn by its allowance, 20 splitters, 3 garbage")
	assert.Equal(t, int64(report.PerOtherConn), b.PerOther)
	assert.Equal(t, int64(32<<20), b.Fixed)

	o, err = parseFlags([]string{"-proto", "raw", "-scenario", "nonreader,connflood", "-max-conns", "900", "-output-limit", "1M", "-mem-allowance", "8M"}, io.Discard)
	require.NoError(t, err)
	p = makePlan(o, 1<<20, 28000, true)
	b = o.bound.For(p.conns, p.churnOpen, p.neighbours, o.Proto == attack.Framed)
	assert.Zero(t, b.UnackedLimit, "raw: no acknowledgements")
	assert.Equal(t, 1100, b.Other, "connflood runs alone: its own count")
	assert.Equal(t, int64(4*(1<<20)+1100*report.PerOtherConn+(8<<20)), b.Total())
	assert.Equal(t, 1100, p.conns[scenario.Connflood])
}

// TestEndToEnd_HostileAgainstPlainEcho: plainEcho has no output limit, so
// a non-reader makes it queue whatever it is sent: the memory check and the
// nonreader's own check (not closed) must fail; the polite splitters still
// pass byte for byte, and a raw server echoes garbage, closing nothing,
// which the raw protocol allows: garbage is not applicable, neither ok nor
// failed.
//
// The flood must pass the memory bound within the window: a harness kept
// off the CPU for a quarter of it (its own SelfLag) may not have sent
// enough, and is run again with a window three times as long.
func TestEndToEnd_HostileAgainstPlainEcho(t *testing.T) {
	var r *report.Result
	var out string
	for _, window := range []time.Duration{time.Second, 3 * time.Second, 9 * time.Second} {
		r, out = e2e(t, "-addr", startPlainEcho(t, 0), "-server-pid", strconv.Itoa(os.Getpid()), "-scenario", "nonreader,splitter,garbage", "-nonreader-conns", "1", "-splitter-conns", "4",
			"-garbage-conns", "1", "-duration", window.String(), "-rate", "100", "-hostile-bytes", "256M")
		if r.Memory == nil || r.Memory.Growth() > r.Memory.Bound.Total() || r.SelfLag.Stalled < window/4 {
			break
		}
		t.Logf("the flood did not pass the bound in %v, with %v of it lost to the machine: again", window, r.SelfLag.Stalled)
	}
	m := r.Memory
	require.NotNil(t, m, out)
	require.Empty(t, m.Err)
	assert.False(t, m.InProcess, "read from -server-pid's /proc/PID/status")
	assert.Equal(t, int64(4<<20+4*report.PerOtherConn+32<<20), m.Bound.Total(), "4 MiB for the non-reader, 32 KiB for each of the 4 splitters (raw garbage does not apply, and does not run), 32 MiB")
	assert.Greater(t, m.Growth(), m.Bound.Total(), "plainEcho queues all the non-reader is sent")
	assert.True(t, m.Stopped, "the flood stopped once the verdict was in")
	assert.Contains(t, out, "[memory] CHECK")
	assert.Contains(t, out, "1 of 2 scenarios need a look (nonreader: lines marked !); the server's memory grew beyond its bound")
	nr := r.Scenario("nonreader")
	assert.Zero(t, nr.ServerClosed, "plainEcho closes nothing")
	assert.Equal(t, 1, nr.Held())
	assert.Contains(t, out, "[nonreader] CHECK")
	assert.Contains(t, out, "! 1 of 1 non-readers were still open when the server's memory passed its bound")
	sp := r.Scenario("splitter")
	assert.Positive(t, sp.Sent)
	assert.Equal(t, sp.Sent, sp.Recv)
	assert.Zero(t, sp.Mismatch)
	assert.Empty(t, verdict(sp))
	g := r.Scenario("garbage")
	assert.Zero(t, g.Conns, "not applicable: not run")
	assert.NotEmpty(t, g.NotApplicable)
	assert.Contains(t, out, "[garbage] not applicable")
	assert.Equal(t, 2, r.Judge().Failures, "the nonreader and the memory")
}

// TestEndToEnd_HostileAgainstNetwheel: netserver closes a non-reader
// before its output grows far, keeps the splitters, and closes framed
// garbage with a CLOSE frame saying why; its memory stays in bounds.
func TestEndToEnd_HostileAgainstNetwheel(t *testing.T) {
	r, out := e2e(t, "-scenario", "nonreader,splitter,garbage", "-nonreader-conns", "2", "-splitter-conns", "4",
		"-garbage-conns", "3", "-duration", "1s", "-rate", "100")
	assert.Contains(t, out, "all 3 scenarios judged are ok; the server's memory within its bound", out)
	nr := r.Scenario("nonreader")
	assert.Equal(t, 2, nr.ServerClosed, "both non-readers closed by the server")
	assert.Less(t, nr.CloseAfter.Max(), int64(time.Second+2*r.SelfLag.Stalled), "within the sending window, but for what the machine took")
	sp := r.Scenario("splitter")
	assert.Equal(t, 4, sp.Survived)
	assert.Positive(t, sp.Sent)
	assert.Equal(t, sp.Sent, sp.Recv)
	assert.Zero(t, sp.Mismatch)
	g := r.Scenario("garbage")
	assert.Equal(t, 3, g.ServerClosed)
	assert.Equal(t, 1, g.Roles[scenario.GarbageHugeLength].Ends["frame_too_large"], "%v", g.Roles[scenario.GarbageHugeLength].Ends)
	assert.Equal(t, 1, g.Roles[scenario.GarbageBadType].Ends["protocol_error"], "%v", g.Roles[scenario.GarbageBadType].Ends)
	require.NotNil(t, r.Memory)
	assert.LessOrEqual(t, r.Memory.Growth(), r.Memory.Bound.Total())
	require.NotNil(t, r.Server)
	assert.Zero(t, r.Server.Open)

	// The server's own account of why it closed: the non-readers by their
	// output (framed: the unacknowledged payload, or the queued output),
	// the garbage for the frame it broke (random bytes: too large a
	// length, or a bad type), and the splitters when the client said
	// goodbye; nothing else.
	cl := maps.Clone(r.Server.Closes)
	assert.Equal(t, int64(2), cl["unacked_limit"]+cl["output_limit"], "the non-readers: %v", cl)
	assert.GreaterOrEqual(t, cl["frame_too_large"], int64(1), "huge_length: %v", cl)
	assert.GreaterOrEqual(t, cl["protocol_error"], int64(1), "bad_type: %v", cl)
	assert.Equal(t, int64(3), cl["frame_too_large"]+cl["protocol_error"], "the garbage: %v", cl)
	assert.Equal(t, int64(4), cl["peer_closed"], "the splitters: %v", cl)
	maps.DeleteFunc(cl, func(k string, _ int64) bool {
		return slices.Contains([]string{"unacked_limit", "output_limit", "frame_too_large", "protocol_error", "peer_closed"}, k)
	})
	assert.Empty(t, cl, "no close for another reason")
}

// TestEndToEnd_ConnfloodAgainstNetwheel: beyond MaxConns the server closes
// at once with a CLOSE saying overload; a baseline without a limit holds
// every connection and fails the check.
func TestEndToEnd_Connflood(t *testing.T) {
	r, out := e2e(t, "-scenario", "connflood", "-max-conns", "30", "-flood-conns", "50", "-idle", "400ms")
	c := r.Scenario("connflood")
	assert.Equal(t, 30, c.Limit)
	assert.Equal(t, 30, c.Held(), "the server holds its limit, no more and no fewer")
	assert.Equal(t, 50, c.Held()+c.ServerClosed+c.DialErrors["refused"], "held, closed or refused")
	assert.Positive(t, c.Ends["overload"], "framed: a CLOSE frame saying overload: %v", c.Ends)
	assert.Contains(t, out, "[connflood] ok")

	r, out = e2e(t, "-addr", startPlainEcho(t, 0), "-scenario", "connflood", "-max-conns", "30", "-flood-conns", "50", "-idle", "400ms")
	assert.Equal(t, 50, r.Scenario("connflood").Held(), "plainEcho knows no limit")
	assert.Contains(t, out, "! the server held 50 connections open, above its limit of 30")
}
