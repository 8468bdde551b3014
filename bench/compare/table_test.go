package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPerRound(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name       string
		vals, refs []float64
		compare    int
		want       []float64
	}{
		{name: "ratios", vals: []float64{90, 120}, refs: []float64{100, 100}, compare: ratioTo, want: []float64{0.9, 1.2}},
		{name: "differences", vals: []float64{3000, 2000}, refs: []float64{1000, 1500}, compare: diffOfRef, want: []float64{2000, 500}},
		{name: "a round missing on either side is skipped", vals: []float64{nan, 50, 60}, refs: []float64{100, nan, 120}, compare: ratioTo, want: []float64{0.5}},
		{name: "a zero reference gives no ratio", vals: []float64{5}, refs: []float64{0}, compare: ratioTo, want: nil},
		{name: "a zero reference still gives a difference", vals: []float64{5}, refs: []float64{0}, compare: diffOfRef, want: []float64{5}},
		{name: "no comparison", vals: []float64{5}, refs: []float64{1}, compare: noRatio, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := perRound(tt.vals, tt.refs, tt.compare)
			require.Len(t, got, len(tt.want))
			for i := range got {
				assert.InDelta(t, tt.want[i], got[i], 1e-12)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	med, lo, hi, ok := spread([]float64{1.2, 0.8, 1.0})
	require.True(t, ok)
	assert.Equal(t, []float64{1.0, 0.8, 1.2}, []float64{med, lo, hi})
	med, lo, hi, ok = spread([]float64{0.9, 1.3})
	require.True(t, ok)
	assert.InDelta(t, 1.1, med, 1e-12, "the mean of the middle two")
	assert.Equal(t, []float64{0.9, 1.3}, []float64{lo, hi})
	_, _, _, ok = spread(nil)
	assert.False(t, ok)

	r := tableRow{format: fixed(2), unit: "KiB", compare: diffOfRef}
	assert.Equal(t, "+2.50 [-0.50, +3.00]", ratioCell(r, []float64{2.5, -0.5, 3}))
	assert.Equal(t, "0.85 [0.72-0.96]", ratioCell(tableRow{compare: ratioTo}, []float64{0.96, 0.72, 0.85}))
	assert.Equal(t, "-", ratioCell(r, nil))
}

func TestRoundOrder(t *testing.T) {
	tests := []struct {
		name  string
		n, r  int
		order []int
	}{
		{name: "first round as listed", n: 5, r: 0, order: []int{0, 1, 2, 3, 4}},
		{name: "second round reversed", n: 5, r: 1, order: []int{4, 3, 2, 1, 0}},
		{name: "third round rotated by one", n: 5, r: 2, order: []int{1, 2, 3, 4, 0}},
		{name: "fourth round that reversed", n: 5, r: 3, order: []int{0, 4, 3, 2, 1}},
		{name: "two servers alternate", n: 2, r: 1, order: []int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.order, roundOrder(tt.n, tt.r))
		})
	}
}

func TestCell(t *testing.T) {
	figs := []tableFigures{newTableFigures(), newTableFigures()}
	figs[0].closedRate, figs[1].closedRate = 79_600, 950
	rows := tableRows(tableSpec{})
	assert.Equal(t, "79.6k / 950", cell(rows[0], figs))
	figs[0].fixedP99 = 30.3e6
	assert.Equal(t, "30.30 / - ms", cell(rows[1], figs), "a round without the figure")
	assert.Equal(t, "-", cell(rows[2], figs), "no round with it")
	figs[0].reapExpected, figs[1].reapExpected = 10, 10
	assert.Equal(t, "never", cell(rows[4], figs), "no connection closed in any round")
}

// fabricated returns figures for the rendering test: netwheel and gnet
// over two rounds, gnet never reaping.
func fabricated() [][]tableFigures {
	f := func(rate, p99, cpu, rssOpen float64, reaps bool) tableFigures {
		x := newTableFigures()
		x.closedRate, x.fixedP99, x.fixedRate, x.cpu = rate, p99, 40_000, cpu
		x.reapExpected = 8000
		if reaps {
			x.reapClosed, x.reapP50, x.reapP99, x.reapMax, x.reapAckP99, x.reapOwnP99, x.reapWireP99 = 8000, 1.82e6, 3.58e6, 4.12e6, 1.25e6, 2.5e6, 2.1e6
		}
		x.rssStart, x.rssOpen, x.rssConns = 12<<20, rssOpen, 8000
		return x
	}
	return [][]tableFigures{
		{f(79_600, 30.3e6, 5.21, 36<<20, true), f(79_600, 13.8e6, 5.77, 33<<20, true)},
		{f(96_300, 4.1e6, 5.00, 14<<20, false), f(110_500, 4.4e6, 4.77, 14<<20, false)},
	}
}

func TestRenderTable(t *testing.T) {
	s := tableSpec{closedConns: 1000, closedFor: 5 * time.Second, fixedConns: 8000, fixedRate: 5, fixedFor: 10 * time.Second,
		idleConns: 8000, idleTimeout: 3 * time.Second, rssConns: 8000, rssHold: time.Second, trafficIdle: 5 * time.Minute,
		size: 64, rounds: 2, servers: []string{"netwheel", "gnet"}, reference: 1, netwheelArgs: "-proto raw"}
	var b bytes.Buffer
	renderTable(&b, s, fabricated(), []string{"round 2, reap phase, gnet: a note"})
	out := b.String()
	t.Log("\n" + out)
	// row returns the cells of the row labelled label, in the ratio
	// table once its heading has passed.
	ratios := false
	row := func(label string) []string {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "Per-round ratio") && !ratios {
				break
			}
			if strings.HasPrefix(l, label+"  ") {
				return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(strings.TrimPrefix(l, label)), -1)
			}
		}
		require.Failf(t, "no row", "%q", label)
		return nil
	}
	assert.Contains(t, out, "2 rounds in alternating order; each cell: round 1 / round 2.")
	assert.Contains(t, out, "netwheel       cmd/echo -proto raw, every other setting its default")
	assert.Contains(t, out, "gnet           bare gnet v2, no timers (compare serve -server gnet)")
	assert.Equal(t, []string{"79.6k / 79.6k", "96.3k / 110.5k"}, row("msgs/s, 1000 conns, closed loop"))
	assert.Equal(t, []string{"30.30 / 13.80 ms", "4.10 / 4.40 ms"}, row("p99, 8000 conns at 5 msg/s each"))
	assert.Equal(t, []string{"5.21 / 5.77 s", "5.00 / 4.77 s"}, row("server CPU at that fixed rate"))
	assert.Equal(t, []string{"1.82 / 1.82 ms", "never"}, row("8000 idle reaped: error p50"))
	assert.Equal(t, []string{"3.58 / 3.58 ms", "never"}, row("  error p99"))
	assert.Equal(t, []string{"4.12 / 4.12 ms", "never"}, row("  error max"))
	assert.Equal(t, []string{"1.25 / 1.25 ms", "never"}, row("  error p99 from the echo"))
	assert.Equal(t, []string{"2.50 / 2.50 ms", "never"}, row("  server's own close delay p99"))
	assert.Equal(t, []string{"2.10 / 2.10 ms", "-"}, row("  error p99 on the wire (FIN)"))
	assert.Equal(t, []string{"36.0 / 33.0 MiB", "14.0 / 14.0 MiB"}, row("RSS with 8000 open"))
	// (36-12) MiB / 8000 = 3.072 KiB; (33-12) MiB / 8000 = 2.688 KiB; gnet 0.256 KiB.
	assert.Equal(t, []string{"3.07 / 2.69 KiB", "0.26 / 0.26 KiB"}, row("  per conn above start"))

	assert.Contains(t, out, "Per-round ratio to gnet, median [min-max] over rounds:")
	out, ratios = out[strings.Index(out, "Per-round ratio"):], true
	// 79.6/96.3 = 0.827, 79.6/110.5 = 0.720: median 0.773.
	assert.Equal(t, []string{"0.77 [0.72-0.83]", "1"}, row("msgs/s, closed loop"))
	// 30.3/4.1 = 7.39, 13.8/4.4 = 3.14.
	assert.Equal(t, []string{"5.26 [3.14-7.39]", "1"}, row("p99 at the fixed rate"))
	assert.Equal(t, []string{"1.13 [1.04-1.21]", "1"}, row("server CPU at the fixed rate"))
	assert.NotContains(t, out, "reap error p99: none", "the reaps have no ratio to a server without timers")
	assert.Equal(t, []string{"2.46 [2.36-2.57]", "1"}, row("RSS with 8000 open"))
	assert.Equal(t, []string{"+2.62 [+2.43, +2.82]", "0"}, row("RSS per conn minus gnet's, KiB"))
	assert.Contains(t, out, "Per-round figures, median [min-max] over rounds:")
	assert.Equal(t, []string{"3.58 [3.58-3.58] ms", "never"}, row("reap error p99"))
	assert.Equal(t, []string{"1.25 [1.25-1.25] ms", "never"}, row("reap error p99 from the echo"))
	assert.Equal(t, []string{"2.50 [2.50-2.50] ms", "never"}, row("server's own close delay p99"))
	assert.Equal(t, []string{"2.10 [2.10-2.10] ms", "-"}, row("reap error p99 on the wire (FIN)"))
	assert.Contains(t, out, "Notes:\n  round 2, reap phase, gnet: a note\n")

	b.Reset()
	s.reference = 0
	renderTable(&b, s, fabricated(), nil)
	assert.Contains(t, b.String(), "Per-round ratio to netwheel")
	assert.Regexp(t, `\nreap error p99 +3\.58 \[3\.58-3\.58\] ms +never\n`, b.String(), "the reaps are each server's own figures, whatever the reference")
	assert.NotContains(t, b.String(), "Notes:")
}

func TestRenderTable_Phases(t *testing.T) {
	s := tableSpec{idleConns: 8000, idleTimeout: 3 * time.Second, rounds: 2, servers: []string{"netwheel", "gnet"}, reference: 1,
		netwheelArgs: "-proto raw", phases: []string{phaseReap}}
	var b bytes.Buffer
	renderTable(&b, s, fabricated(), nil)
	out := b.String()
	t.Log("\n" + out)
	assert.Contains(t, out, "Phases: reap: idle timeout 3s.\n")
	assert.Contains(t, out, "8000 idle reaped: error p50")
	assert.Contains(t, out, "Per-round figures, median [min-max] over rounds:")
	for _, gone := range []string{"closed loop", "fixed rate", "RSS", "Per-round ratio"} {
		assert.NotContains(t, out, gone, "a phase not run has no rows")
	}
}

func TestSettleBefore(t *testing.T) {
	tests := []struct {
		name   string
		phases []string
		phase  string
		want   time.Duration
	}{
		{name: "reap after other phases", phases: tablePhases, phase: phaseReap, want: 10 * time.Second},
		{name: "reap after fixed alone", phases: []string{phaseFixed, phaseReap}, phase: phaseReap, want: 10 * time.Second},
		{name: "reap alone", phases: []string{phaseReap}, phase: phaseReap, want: 0},
		{name: "no phases listed: all", phases: nil, phase: phaseReap, want: 10 * time.Second},
		{name: "not before other phases", phases: tablePhases, phase: phaseFixed, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tableSpec{phases: tt.phases, settleReap: 10 * time.Second}
			assert.Equal(t, tt.want, s.settleBefore(tt.phase))
		})
	}
}

func TestRenderTable_SettleInHeading(t *testing.T) {
	s := tableSpec{fixedConns: 8000, fixedRate: 5, fixedFor: 10 * time.Second, idleConns: 8000, idleTimeout: 3 * time.Second,
		rounds: 2, servers: []string{"netwheel", "gnet"}, reference: 1, netwheelArgs: "-proto raw",
		phases: []string{phaseFixed, phaseReap}, settleReap: 10 * time.Second}
	var b bytes.Buffer
	renderTable(&b, s, fabricated(), nil)
	assert.Contains(t, b.String(), "Phases: fixed rate for 10s; reap (after 10s at rest): idle timeout 3s.\n")

	b.Reset()
	s.phases = []string{phaseReap}
	renderTable(&b, s, fabricated(), nil)
	assert.Contains(t, b.String(), "Phases: reap: idle timeout 3s.\n", "no rest before a reap phase that runs alone")
}

func TestEchoAddr(t *testing.T) {
	tests := []struct {
		name, line, want string
		ok               bool
	}{
		{name: "text log", line: `time=2026-11-23T19:27:20.497Z level=INFO msg="echo: serving" addr=127.0.0.1:45453 proto=raw event_loops=1`,
			want: "127.0.0.1:45453", ok: true},
		{name: "json log", line: `{"time":"x","level":"INFO","msg":"echo: serving","addr":"127.0.0.1:9000","proto":"raw"}`, want: "", ok: false},
		{name: "quoted value", line: `level=INFO msg="echo: serving" addr="[::1]:9000"`, want: "[::1]:9000", ok: true},
		{name: "another line", line: `level=INFO msg="netserver: listening" addr=127.0.0.1:45453`, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := echoAddr(tt.line)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLineWatch(t *testing.T) {
	w := newLineWatch(func(l string) (string, bool) { return strings.CutPrefix(l, "listening ") })
	for i := range tailLines {
		_, _ = io.WriteString(w, "noise "+strconv.Itoa(i)+"\n")
	}
	_, _ = io.WriteString(w, "listen")
	select {
	case <-w.found:
		t.Fatal("found on half a line")
	default:
	}
	_, _ = io.WriteString(w, "ing 127.0.0.1:7\nlistening 127.0.0.1:8\nlast")
	<-w.found
	assert.Equal(t, "127.0.0.1:7", w.value(), "the first match")
	words := w.lastWords()
	assert.Contains(t, words, "listening 127.0.0.1:8")
	assert.NotContains(t, words, "noise 1\n", "only the last lines")
	assert.NotContains(t, words, "\tlast", "not an unfinished line")
}

func TestCompareTable_Errors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "one server", args: []string{"-servers", "gnet"}, want: "at least two"},
		{name: "unknown server", args: []string{"-servers", "gnet,nginx"}, want: "nginx"},
		{name: "server twice", args: []string{"-servers", "gnet,gnet"}, want: "twice"},
		{name: "reference not among the servers", args: []string{"-servers", "netwheel,nbio"}, want: "-reference"},
		{name: "no connections", args: []string{"-conns-idle", "0"}, want: "at least 1"},
		{name: "zero duration", args: []string{"-duration-fixed", "0s"}, want: "positive"},
		{name: "zero rate", args: []string{"-rate-fixed", "0"}, want: "-rate"},
		{name: "spread beyond half the idle timeout", args: []string{"-idle-spread", "2s"}, want: "-idle-spread"},
		{name: "more connections than open files", args: []string{"-conns-rss", "1000000"}, want: "open files"},
		{name: "echo-bin without netwheel", args: []string{"-servers", "gnet,nbio", "-echo-bin", "/bin/true"}, want: "-echo-bin"},
		{name: "unknown phase", args: []string{"-phases", "reap,warmup"}, want: "warmup"},
		{name: "phase twice", args: []string{"-phases", "reap,reap"}, want: "twice"},
		{name: "negative rest", args: []string{"-settle-reap", "-1s"}, want: "-settle-reap"},
		{name: "run flags", args: []string{"-conns-idle", "5", "--", "-proto", "raw"}, want: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := realMain(context.Background(), tt.args, io.Discard, io.Discard)
			require.ErrorIs(t, err, errUsage)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestCompareTable runs the whole table with tiny counts, every server in
// a process of its own (cmd/echo built from the module; the baselines this
// test binary's `compare serve`, see TestMain), and checks that every
// cell is filled and plausible.
func TestCompareTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 20 server processes and builds cmd/echo")
	}
	// Under -race, each server process would sleep a second at exit.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var out, progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	echoBin, harnessBin := binaries(t)
	require.NoError(t, realMain(ctx, []string{"-rounds", "1", "-pause", "0s", "-echo-bin", echoBin, "-loadtest-bin", harnessBin,
		"-conns-closed", "8", "-duration-closed", "300ms",
		// Enough messages for the CPU time, read in 10 ms ticks.
		"-conns-fixed", "100", "-rate-fixed", "50", "-duration-fixed", "1s",
		"-conns-idle", "40", "-idle-timeout", "600ms", "-conns-rss", "100", "-hold-rss", "100ms", "-settle-reap", "50ms"}, &out, &progress))
	t.Log("\n" + out.String() + "\n" + progress.String())
	main, ratios, found := strings.Cut(out.String(), "Per-round ratio to gnet")
	require.True(t, found, "no ratio table")
	rowIn := func(part, label string) []string {
		t.Helper()
		for _, l := range strings.Split(part, "\n") {
			if strings.HasPrefix(l, label+"  ") {
				return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(strings.TrimPrefix(l, label)), -1)
			}
		}
		require.Failf(t, "no row", "%q in\n%s", label, part)
		return nil
	}
	row := func(label string) []string { return rowIn(main, label) }
	servers := []string{"netwheel", "gnet", "gnetafterfunc", "netdeadline", "nbio"}
	assert.Regexp(t, `\n +netwheel +gnet +gnetafterfunc +netdeadline +nbio\n`, out.String(), "the header row, in -servers' order")
	number := func(cell, unit string) float64 {
		t.Helper()
		s := strings.TrimSpace(strings.TrimSuffix(cell, unit))
		mult := 1.0
		if k, ok := strings.CutSuffix(s, "k"); ok {
			s, mult = k, 1000
		}
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err, "cell %q", cell)
		return v * mult
	}
	for i, kind := range servers {
		assert.Positive(t, number(row("msgs/s, 8 conns, closed loop")[i], ""), kind)
		assert.Positive(t, number(row("p99, 100 conns at 50 msg/s each")[i], "ms"), kind)
		assert.Positive(t, number(row("server CPU at that fixed rate")[i], "s"), kind)
		assert.Positive(t, number(row("RSS at start")[i], "MiB"), kind)
		assert.Positive(t, number(row("RSS with 100 open")[i], "MiB"), kind)
		number(row("  per conn above start")[i], "KiB")
		for _, r := range []string{"40 idle reaped: error p50", "  error p99", "  error max"} {
			c := row(r)[i]
			if kind == "gnet" {
				assert.Equal(t, "never", c, "gnet has no timers")
				continue
			}
			v := number(c, "ms")
			assert.Greater(t, v, -1.0, "%s %s: not more than a tick early", kind, r)
			assert.Less(t, v, 500.0, "%s %s: within the slack", kind, r)
		}
		if ack := row("  error p99 from the echo")[i]; kind == "gnet" {
			assert.Equal(t, "never", ack, "gnet has no timers")
		} else {
			// Each connection's echo comes after its send, so its error
			// from the echo is the smaller: a lower bound.
			assert.LessOrEqual(t, number(ack, "ms"), number(row("  error p99")[i], "ms")+0.01, kind)
		}
		if own := row("  server's own close delay p99")[i]; kind == "gnet" {
			assert.Equal(t, "never", own, "gnet has no timers")
		} else {
			// Read from the server's metrics: every timer server reports
			// its own close delay, a bucket bound within the slack.
			v := number(own, "ms")
			assert.Positive(t, v, kind)
			assert.Less(t, v, 500.0, kind)
		}
	}
	// The FINs are captured where the test has CAP_NET_RAW; each FIN
	// passes before the client reads it, so its error is the smaller.
	for i, c := range rowIn(ratios, "reap error p99 on the wire (FIN)") {
		if servers[i] == "gnet" || c == "-" {
			assert.True(t, c == "-" || servers[i] != "gnet", "gnet has no timers: %q", c)
			continue
		}
		require.Regexp(t, `^\d+\.\d\d \[\d+\.\d\d-\d+\.\d\d\] ms$`, c, servers[i])
		assert.LessOrEqual(t, number(row("  error p99 on the wire (FIN)")[i], "ms"), number(row("  error p99")[i], "ms")+0.01, servers[i])
	}
	for _, r := range []string{"reap error p99", "reap error p99 from the echo", "server's own close delay p99"} {
		for i, c := range rowIn(ratios, r) {
			if servers[i] == "gnet" {
				assert.Equal(t, "never", c, "gnet has no timers")
				continue
			}
			assert.Regexp(t, `^\d+\.\d\d \[\d+\.\d\d-\d+\.\d\d\] ms$`, c, "%s: %s", r, servers[i])
		}
	}
	for _, r := range []string{"msgs/s, closed loop", "p99 at the fixed rate", "server CPU at the fixed rate", "RSS with 100 open"} {
		for i, c := range rowIn(ratios, r) {
			if servers[i] == "gnet" {
				assert.Equal(t, "1", c, "gnet is the reference")
				continue
			}
			assert.Regexp(t, `^\d+\.\d\d \[\d+\.\d\d-\d+\.\d\d\]$`, c, "%s: %s", r, servers[i])
		}
	}
	assert.Regexp(t, `^[+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\]$`, rowIn(ratios, "RSS per conn minus gnet's, KiB")[0])
	assert.Equal(t, 1, strings.Count(progress.String(), "round 1/1 reap   resting 50ms first\n"), "one rest, before the reap phase:\n%s", progress.String())
	rest := strings.Index(progress.String(), "round 1/1 reap   resting")
	assert.Greater(t, rest, strings.LastIndex(progress.String(), "round 1/1 rss "), "the rest comes after the phase before it")
	assert.Less(t, rest, strings.Index(progress.String(), "round 1/1 reap   netwheel"), "the rest comes before the first reap run")
	assert.Equal(t, 21, strings.Count(progress.String(), "round 1/1 "), "four phases, five servers, and the rest:\n%s", progress.String())
}

func TestStartEcho_MissingBinary(t *testing.T) {
	_, err := startEcho(context.Background(), filepath.Join(os.TempDir(), "no-such-echo-binary"), time.Second)
	assert.Error(t, err)
}

func TestFixedShortfall(t *testing.T) {
	tests := []struct {
		name    string
		echoed  float64
		conns   int
		perConn float64
		want    bool
	}{
		{name: "reached", echoed: 40_000, conns: 8000, perConn: 5, want: false},
		{name: "within 5%", echoed: 38_000, conns: 8000, perConn: 5, want: false},
		{name: "short", echoed: 36_250, conns: 8000, perConn: 5, want: true},
		{name: "nothing echoed", echoed: math.NaN(), conns: 8000, perConn: 5, want: false},
		{name: "no rate", echoed: 0, conns: 8000, perConn: 0, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			note, short := fixedShortfall(tc.echoed, tc.conns, tc.perConn)
			assert.Equal(t, tc.want, short)
			if tc.want {
				assert.Contains(t, note, "36250 msgs/s echoed of 40000 offered")
			} else {
				assert.Empty(t, note)
			}
		})
	}
}

// TestCompareTable_MetricsPortTaken: a metrics port free when compare
// picked it may be taken when the child server listens on it; the child
// then exits, and compare starts it again on another port.
func TestCompareTable_MetricsPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	picks := 0
	metricsAddrFor = func() (string, error) {
		picks++
		if picks == 1 {
			return busy.Addr().String(), nil // taken since it was picked
		}
		return freeLoopbackAddr()
	}
	defer func() { metricsAddrFor = freeLoopbackAddr }()
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, harnessBin := binaries(t)
	require.NoError(t, realMain(ctx, []string{"-rounds", "1", "-pause", "0s", "-phases", "reap", "-loadtest-bin", harnessBin,
		"-servers", "nbio,gnet", "-reference", "gnet", "-conns-idle", "20", "-idle-timeout", "300ms"}, &out, io.Discard))
	assert.Equal(t, 2, picks, "a second port after the first was taken")
	assert.Contains(t, out.String(), "20 idle reaped")
}
