package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file tests the figures and verdicts of the hostile scenarios and of
// the server's memory.

func TestMemory_Verdict(t *testing.T) {
	bound := MemoryBound{OutputLimit: 4 << 20, UnackedLimit: 1 << 20, Filling: map[string]int{"nonreader": 4, "pingflood": 4},
		Other: 100, PerOther: 32 << 10, Fixed: 32 << 20}
	require.Equal(t, int64(8*(5<<20)+100*(32<<10)+(32<<20)), bound.Total(), "5 MiB x 8 + 32 KiB x 100 + 32 MiB")
	tests := []struct {
		name    string
		m       *Memory
		wantBad bool
	}{
		{name: "within", m: &Memory{Before: 10 << 20, Peak: 10<<20 + bound.Total(), Samples: 5, Bound: bound}},
		{name: "a byte beyond", m: &Memory{Before: 10 << 20, Peak: 10<<20 + bound.Total() + 1, Samples: 5, Bound: bound}, wantBad: true},
		{name: "shrank", m: &Memory{Before: 100 << 20, Peak: 100 << 20, End: 50 << 20, Samples: 5, Bound: bound}},
		{name: "not observed", m: &Memory{Err: "not observed", Peak: 1 << 40, Bound: bound}},
		{name: "only the reading before the run", m: &Memory{Before: 10 << 20, Peak: 1 << 40, Samples: 1, Bound: bound}},
		{name: "no samples", m: &Memory{Peak: 1 << 40, Bound: bound}},
		{name: "no memory at all", m: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bad []string
			for _, c := range (&Result{Memory: tt.m}).Judge().Memory {
				bad = append(bad, c.Line)
			}
			if tt.m != nil && tt.m.Samples < 2 {
				assert.NotEmpty(t, tt.m.Unjudged(), "no growth seen: not judged")
			}
			if tt.wantBad {
				require.Len(t, bad, 1)
				assert.Contains(t, bad[0], "beyond its bound of "+scenario.MiB(bound.Total()))
			} else {
				assert.Empty(t, bad)
			}
		})
	}
}

func hostile(name string) *Scenario {
	s := NewScenario(name, expectOf(name))
	s.Hostile = true
	return s
}

func TestScenario_AddHostile(t *testing.T) {
	s := hostile("pingflood")
	s.Add(ConnResult{Role: "not_reading", Misbehaved: t0, ClosedAt: t0.Add(30 * time.Millisecond), End: "reset", Bytes: 100, Writes: 2}, to, true)
	s.Add(ConnResult{Role: "not_reading", Misbehaved: t0, ClosedAt: t0.Add(50 * time.Millisecond), End: "output_limit", Bytes: 200, Writes: 3}, to, true)
	s.Add(ConnResult{Role: "reading", Misbehaved: t0, End: "client", Bytes: 50, Writes: 1}, to, true)
	s.Add(ConnResult{Role: "reading", DialErr: "refused"}, to, true)
	// The client gave up on the server's bytes: whenever that was seen,
	// it is no close by the server.
	s.Add(ConnResult{Role: "reading", Misbehaved: t0, ClosedAt: t0.Add(time.Millisecond), End: EndBadServerFrame}, to, true)
	assert.Equal(t, 2, s.ServerClosed)
	assert.Equal(t, 1, s.Held())
	assert.Equal(t, uint64(350), s.Bytes)
	assert.Equal(t, uint64(6), s.Writes)
	assert.Equal(t, int64(50*time.Millisecond), s.CloseAfter.Max(), "from the misbehaviour's start")
	require.Len(t, s.Roles, 2)
	assert.Equal(t, 2, s.Roles["not_reading"].ServerClosed)
	assert.Equal(t, map[string]int{"reset": 1, "output_limit": 1}, s.Roles["not_reading"].Ends)
	assert.Equal(t, 3, s.Roles["reading"].Conns)
	assert.Equal(t, 2, s.Roles["reading"].Opened)
	assert.Zero(t, s.Roles["reading"].ServerClosed)
	bad := verdict(s)
	require.Len(t, bad, 3, "%q", bad)
	assert.Contains(t, bad[0], "1 connections failed to open (refused=1)")
	assert.Contains(t, bad[1], "2 of 4 ping flooders were not closed by the server")
	assert.Contains(t, bad[2], "3 ping flooders ended without a CLOSE frame saying ping_flood (bad_server_frame=1 output_limit=1 reset=1)")
}

func TestScenario_VerdictHostile(t *testing.T) {
	tests := []struct {
		name string
		s    func() *Scenario
		want []string // substrings of the failed checks, in order
	}{
		{name: "connflood within its limit, refusals at the door are fine", s: func() *Scenario {
			s := hostile("connflood")
			s.Limit, s.Opened, s.Ends["client"], s.Ends["overload"] = 10, 15, 10, 5
			s.DialErrors["refused"] = 3
			return s
		}},
		{name: "connflood above its limit", s: func() *Scenario {
			s := hostile("connflood")
			s.Limit, s.Opened, s.Ends["client"] = 10, 15, 15
			return s
		}, want: []string{"held 15 connections open, above its limit of 10"}},
		{name: "connflood below its limit: the server refused some it had room for", s: func() *Scenario {
			s := hostile("connflood")
			s.Limit, s.Opened, s.Ends["client"], s.Ends["overload"] = 10, 15, 4, 11
			return s
		}, want: []string{"the server refused 11 connections as overload, more than the 5 beyond its limit of 10 (15 opened)"}},
		{name: "connflood below its limit by idle closes, not refusals: fine", s: func() *Scenario {
			s := hostile("connflood")
			s.Limit, s.Opened, s.Ends["client"], s.Ends["overload"], s.Ends["idle"] = 10, 15, 4, 5, 6
			return s
		}},
		{name: "connflood over raw: refusals are not told from idle closes", s: func() *Scenario {
			s := hostile("connflood")
			s.Proto = "raw"
			s.Limit, s.Opened, s.Ends["client"], s.Ends["eof"] = 10, 15, 4, 11
			return s
		}},
		{name: "nonreader flood below the output limit: not judged", s: func() *Scenario {
			s := hostile("nonreader")
			s.Opened, s.Ends["client"] = 4, 4
			s.NotApplicable = "-hostile-bytes 3.0 MiB is not above the server's limit 4.0 MiB (-output-limit)"
			return s
		}},
		{name: "connflood below its limit but fewer opened: the flood never reached it", s: func() *Scenario {
			s := hostile("connflood")
			s.Limit, s.Opened, s.Ends["client"] = 10, 8, 8
			s.DialErrors["refused"] = 7
			return s
		}},
		{name: "connflood short of file descriptors", s: func() *Scenario {
			s := hostile("connflood")
			s.Limit, s.Ends["client"] = 10, 10
			s.DialErrors["fd_limit"], s.DialErrors["refused"] = 2, 3
			return s
		}, want: []string{"2 connections failed to open (fd_limit=2)"}},
		{name: "splitter intact", s: func() *Scenario {
			s := hostile("splitter")
			s.Sent, s.Recv, s.Survivors, s.Survived = 100, 100, 4, 4
			return s
		}},
		{name: "splitter mismatch, loss and a close", s: func() *Scenario {
			s := hostile("splitter")
			s.Sent, s.Recv, s.Lost, s.Mismatch, s.Survivors, s.Survived = 100, 98, 2, 1, 4, 3
			return s
		}, want: []string{"1 answers differed", "2 messages never answered", "1 of 4 splitter survivors were closed"}},
		{name: "nonreaders closed within the window", s: func() *Scenario {
			return hostileRun("nonreader", "framed", time.Second, nonreaderConn(20*time.Millisecond, "reset"), nonreaderConn(900*time.Millisecond, "eof"))
		}},
		{name: "nonreader kept open: no output limit", s: func() *Scenario {
			return hostileRun("nonreader", "raw", time.Second, nonreaderConn(20*time.Millisecond, "reset"), nonreaderConn(0, "client"))
		}, want: []string{"1 of 2 non-readers were not closed by the server"}},
		{name: "nonreader closed after the window", s: func() *Scenario {
			return hostileRun("nonreader", "framed", time.Second, nonreaderConn(20*time.Millisecond, "reset"), nonreaderConn(1200*time.Millisecond, "reset"))
		}, want: []string{"closed non-readers as late as 1.20s after their misbehaviour began, beyond the 1.00s bound"}},
		{name: "nonreader: any close counts, a CLOSE frame would wait behind the unread output", s: func() *Scenario {
			return hostileRun("nonreader", "framed", 0, nonreaderConn(20*time.Millisecond, "unacked_limit"), nonreaderConn(30*time.Millisecond, "write_error"))
		}},
		{name: "pingflood closed for ping_flood", s: func() *Scenario {
			return hostileRun("pingflood", "framed", time.Second, roleConn("reading", 5*time.Millisecond, "ping_flood"), roleConn("not_reading", 3*time.Millisecond, "ping_flood"))
		}},
		{name: "pingflood against a server without a ping limit", s: func() *Scenario {
			// The reading flooders are served; the others fill their
			// output and are closed by its limit.
			return hostileRun("pingflood", "framed", time.Second, roleConn("reading", 0, "client"), roleConn("not_reading", 40*time.Millisecond, "reset"))
		}, want: []string{"1 of 2 ping flooders were not closed by the server", "1 ping flooders ended without a CLOSE frame saying ping_flood (reset=1)"}},
		{name: "pingflood closed for another reason", s: func() *Scenario {
			return hostileRun("pingflood", "framed", time.Second, roleConn("reading", 5*time.Millisecond, "ping_flood"), roleConn("not_reading", 40*time.Millisecond, "output_limit"))
		}, want: []string{"1 ping flooders ended without a CLOSE frame saying ping_flood (output_limit=1)"}},
		{name: "garbage closed for frame_too_large and protocol_error", s: func() *Scenario {
			return hostileRun("garbage", "framed", 0, roleConn("random", time.Millisecond, "frame_too_large"), roleConn("bad_type", time.Millisecond, "protocol_error"),
				roleConn("huge_length", time.Millisecond, "frame_too_large"))
		}},
		{name: "garbage kept open by a framed server", s: func() *Scenario {
			return hostileRun("garbage", "framed", 0, roleConn("random", 0, "client"), roleConn("bad_type", time.Millisecond, "protocol_error"))
		}, want: []string{"1 of 2 garbage connections were not closed by the server"}},
		{name: "garbage closed without a CLOSE frame", s: func() *Scenario {
			return hostileRun("garbage", "framed", 0, roleConn("random", time.Millisecond, "eof"), roleConn("bad_type", time.Millisecond, "idle"))
		}, want: []string{"2 garbage connections ended without a CLOSE frame saying frame_too_large or protocol_error or frame_deadline (eof=1 idle=1)"}},
		{name: "garbage the client gave up on: the server sent bytes that are no frame", s: func() *Scenario {
			return hostileRun("garbage", "framed", 0, roleConn("random", time.Millisecond, EndBadServerFrame))
		}, want: []string{"1 of 1 garbage connections were not closed by the server", "ended without a CLOSE frame saying frame_too_large or protocol_error or frame_deadline (bad_server_frame=1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := verdict(tt.s())
			require.Len(t, bad, len(tt.want), "%q", bad)
			for i, w := range tt.want {
				assert.Contains(t, bad[i], w)
			}
		})
	}
}

// hostileRun returns the figures of connections rs of a hostile scenario
// over proto, with closes due within closeWithin (0: unbounded).
func hostileRun(name, proto string, closeWithin time.Duration, rs ...ConnResult) *Scenario {
	s := hostile(name)
	s.Proto, s.CloseWithin = proto, closeWithin
	for _, r := range rs {
		s.Add(r, to, true)
	}
	return s
}

// roleConn is a hostile connection of role that ended with end, closedAfter
// its misbehaviour began (0: the server did not close it).
func roleConn(role string, closedAfter time.Duration, end string) ConnResult {
	r := ConnResult{Role: role, Misbehaved: t0, End: end}
	if closedAfter > 0 {
		r.ClosedAt = t0.Add(closedAfter)
	}
	return r
}

func nonreaderConn(closedAfter time.Duration, end string) ConnResult {
	return roleConn("nonreader", closedAfter, end)
}

func TestText_HostileAndMemory(t *testing.T) {
	r := shard("1/1", 10, 5e5)
	g := hostile("garbage")
	g.Proto = "framed"
	g.Add(ConnResult{Role: "huge_length", Misbehaved: t0, ClosedAt: t0.Add(2 * time.Millisecond), End: "frame_too_large"}, to, true)
	g.Add(ConnResult{Role: "random", Misbehaved: t0, ClosedAt: t0.Add(4 * time.Millisecond), End: "protocol_error"}, to, true)
	r.Scenarios = append(r.Scenarios, g)
	r.Memory = &Memory{Source: "/proc/self/status", InProcess: true, Before: 10 << 20, Peak: 20 << 20, End: 15 << 20, Samples: 3,
		Bound: MemoryBound{OutputLimit: 4 << 20, Filling: map[string]int{"nonreader": 1}, Other: 2, PerOther: 32 << 10, Fixed: 32 << 20}}
	var b bytes.Buffer
	Text(&b, r, r.Judge())
	out := b.String()
	assert.Contains(t, out, "[garbage] ok")
	assert.Contains(t, out, "closed by the server: 2 of 2, after the misbehaviour began: p50 2.00ms")
	assert.Contains(t, out, "    huge_length: 1 of 1 closed (p50 2.00ms, max 2.00ms); ended: frame_too_large=1")
	assert.Contains(t, out, "    random: 1 of 1 closed (p50 4.00ms, max 4.00ms); ended: protocol_error=1")
	assert.Contains(t, out, "[memory] ok: RSS of this process (server embedded: the client's memory is included) 10.0 MiB before, peak 20.0 MiB (+10.0 MiB)")
	assert.Contains(t, out, "bound: +36.1 MiB = 4.0 MiB output x 1 connections that may not read (nonreader 1) + 32 KiB x 2 other connections + 32.0 MiB")
	assert.Contains(t, out, "all 2 scenarios judged are ok; the server's memory within its bound\n")

	r.Memory.Peak = 100 << 20
	b.Reset()
	Text(&b, r, r.Judge())
	assert.Contains(t, b.String(), "[memory] CHECK")
	assert.Contains(t, b.String(), "  ! the server's memory grew by 90.0 MiB, beyond its bound of 36.1 MiB")
	assert.Contains(t, b.String(), "all 2 scenarios judged are ok; the server's memory grew beyond its bound")

	// Memory without figures is not judged, and the last line says so
	// rather than "within its bound"; it fails nothing.
	bound := r.Memory.Bound
	for _, tt := range []struct {
		name string
		m    *Memory
		why  string
	}{
		{name: "not observed", m: &Memory{Err: "not observed: give -server-pid", Bound: bound}, why: "not observed: give -server-pid"},
		{name: "only the reading before the run", m: &Memory{Source: "/proc/9/status", Before: 10 << 20, Peak: 10 << 20, End: 10 << 20, Samples: 1, Bound: bound},
			why: "the server's memory was not read during or after the run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r.Memory = tt.m
			var b bytes.Buffer
			Text(&b, r, r.Judge())
			assert.Contains(t, b.String(), "[memory] not judged: "+tt.why)
			assert.NotContains(t, b.String(), "[memory] ok")
			assert.NotContains(t, b.String(), "within its bound")
			assert.Contains(t, b.String(), "all 2 scenarios judged are ok; the server's memory not judged (see [memory])\n")
			assert.Zero(t, r.Judge().Failures, "not judged is not failed")
		})
	}

	// A framed garbage connection the server kept fails the scenario, and
	// the run.
	r.Memory = nil
	g.Add(ConnResult{Role: "bad_type", Misbehaved: t0, End: "client"}, to, true)
	b.Reset()
	Text(&b, r, r.Judge())
	assert.Contains(t, b.String(), "[garbage] CHECK")
	assert.Contains(t, b.String(), "  ! 1 of 3 garbage connections were not closed by the server")
	assert.Contains(t, b.String(), "1 of 2 scenarios need a look (garbage: lines marked !)\n")
	assert.Equal(t, 1, r.Judge().Failures)

	// Not applicable (raw garbage, say): one line saying why, nothing
	// else, and not counted among the judged.
	g.NotApplicable = "raw protocol: any bytes are a valid stream to answer, so there is nothing to close the connection for"
	b.Reset()
	Text(&b, r, r.Judge())
	assert.Contains(t, b.String(), "\n[garbage] not applicable: raw protocol: any bytes are a valid stream to answer, so there is nothing to close the connection for\n\n")
	assert.NotContains(t, b.String(), "1 of 3 garbage")
	assert.Contains(t, b.String(), "the 1 scenario judged is ok\n")
	assert.Zero(t, r.Judge().Failures)
}

func TestMergeAndJSON_Hostile(t *testing.T) {
	mk := func(sh string) *Result {
		s := hostile("pingflood")
		s.Proto, s.CloseWithin = "framed", time.Second
		s.Add(ConnResult{Role: "reading", Misbehaved: t0, ClosedAt: t0.Add(time.Millisecond), End: "idle", Bytes: 10}, to, true)
		return &Result{Version: Version, Shards: []string{sh}, Config: Config{Proto: "framed", Scenarios: []string{"pingflood"}}, Scenarios: []*Scenario{s},
			Memory: &Memory{Samples: 1}}
	}
	m, err := Merge(mk("1/2"), mk("2/2"))
	require.NoError(t, err)
	p := m.Scenario("pingflood")
	assert.True(t, p.Hostile)
	assert.Equal(t, 2, p.ServerClosed)
	assert.Equal(t, uint64(20), p.Bytes)
	assert.Equal(t, 2, p.Roles["reading"].Ends["idle"])
	assert.Equal(t, uint64(2), p.Roles["reading"].CloseAfter.Count())
	assert.Nil(t, m.Memory, "per run, not merged")

	var buf bytes.Buffer
	require.NoError(t, JSON(&buf, m, m.Judge()))
	got, err := ReadJSON(&buf)
	require.NoError(t, err)
	assert.Equal(t, 2, got.Scenario("pingflood").Roles["reading"].ServerClosed)
	assert.Equal(t, "framed", got.Scenario("pingflood").Proto)
	assert.Equal(t, time.Second, got.Scenario("pingflood").CloseWithin)

	one, err := Merge(mk("1/1"))
	require.NoError(t, err)
	assert.NotNil(t, one.Memory)
}

// TestScenario_NonreaderFlood: a non-reader must be closed by the server
// once it has sent its whole flood, more than the server's output limit;
// one the window cut short, or the server stopped reading from, proves
// nothing, and a run of only those is not judged.
func TestScenario_NonreaderFlood(t *testing.T) {
	const flood = 64 << 20
	closed := ConnResult{Role: "nonreader", Misbehaved: t0, ClosedAt: t0.Add(20 * time.Millisecond), End: "reset", Bytes: 5 << 20}
	kept := ConnResult{Role: "nonreader", Misbehaved: t0, End: EndClient, Bytes: flood}
	cut := ConnResult{Role: "nonreader", Misbehaved: t0, End: EndClient, Bytes: 3 << 20}
	for _, tc := range []struct {
		name          string
		conns         []ConnResult
		wantBad       string
		notApplicable bool
		stopped       bool
	}{
		{name: "closed", conns: []ConnResult{closed, closed}},
		{name: "whole flood taken and kept open", conns: []ConnResult{closed, kept}, wantBad: "1 of 2 non-readers sent their whole flood (64.0 MiB) and were not closed"},
		{name: "cut short beside a closed one", conns: []ConnResult{closed, cut}},
		{name: "all cut short: not judged", conns: []ConnResult{cut, cut}, notApplicable: true},
		{name: "cut short by the memory verdict", conns: []ConnResult{cut, closed}, stopped: true, wantBad: "1 of 2 non-readers were still open when the server's memory passed its bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := hostile("nonreader")
			s.FloodBytes = flood
			for _, c := range tc.conns {
				s.Add(c, to, true)
			}
			if tc.stopped {
				s.FloodStoppedOpen = s.FloodCut
			}
			bad := verdict(s)
			if tc.wantBad == "" {
				assert.Empty(t, bad)
			} else {
				require.Len(t, bad, 1)
				assert.Contains(t, bad[0], tc.wantBad)
			}
			assert.Equal(t, tc.notApplicable, s.nothingToJudge() != "", s.nothingToJudge())
		})
	}
}

// selfLag returns a harness's lag figures: every wake late by late, and
// the other processes' CPU.
