package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netwheel/netwheel/bench/internal/baseline"
	"github.com/netwheel/netwheel/internal/limits"
)

// This file is compare: the table of netwheel (cmd/echo as shipped)
// against its baselines (docs/perf.md, "The server against its
// baselines"), each server in a process of its own, over rounds in
// alternating order, with per-round ratios to the reference server.

// Defaults of the table's servers and rounds.
const (
	defaultTableServers = "netwheel,gnet,gnetafterfunc,netdeadline,nbio"
	defaultTableRounds  = 2
)

// The table's phases, in the order each round runs them. Every phase runs
// every server in turn (in the round's order), each in a fresh process.
const (
	phaseClosed = "closed" // closed-loop throughput
	phaseFixed  = "fixed"  // latency and server CPU at a fixed rate
	phaseRSS    = "rss"    // RSS with connections open
	phaseReap   = "reap"   // close error of idle connections expiring
)

var tablePhases = []string{phaseClosed, phaseFixed, phaseRSS, phaseReap}

// tableOptions are the table's flags.
type tableOptions struct {
	tableSpec
	refName    string // -reference
	pause      time.Duration
	idleSpread time.Duration
	spreadSet  bool // -idle-spread given: passed on; otherwise the harness's default
	dialConc   int
	echoBin    string
	harnessBin string // -loadtest-bin
	phaseList  string // -phases
}

// tableFlags registers the table's flags on fs, with their defaults, and
// returns where they go. names lists them, for compare's check that the
// echo mode gets none.
func tableFlags(fs *flag.FlagSet) (t *tableOptions, names []string) {
	t = &tableOptions{}
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	fs.IntVar(&t.closedConns, "conns-closed", 1000, "table: connections of the closed-loop throughput phase")
	fs.DurationVar(&t.closedFor, "duration-closed", 5*time.Second, "table: sending time of the closed-loop phase")
	fs.IntVar(&t.fixedConns, "conns-fixed", 8000, "table: connections of the fixed-rate phase (p99 latency, server CPU)")
	fs.Float64Var(&t.fixedRate, "rate-fixed", 5, "table: messages/s per connection in the fixed-rate phase, open loop")
	fs.DurationVar(&t.fixedFor, "duration-fixed", 10*time.Second, "table: sending time of the fixed-rate phase")
	fs.IntVar(&t.idleConns, "conns-idle", 8000, "table: idle connections the servers must reap in the reap phase")
	fs.DurationVar(&t.idleTimeout, "idle-timeout", 3*time.Second, "table: the servers' idle timeout in the reap phase")
	fs.DurationVar(&t.idleSpread, "idle-spread", 0, "table: window over which the idle connections send their last message\n"+
		"(default the harness's: a quarter of -idle-timeout, at most 1s; 0 given: all at once)")
	fs.IntVar(&t.rssConns, "conns-rss", 8000, "table: connections open when the server's RSS is read")
	fs.DurationVar(&t.rssHold, "hold-rss", time.Second, "table: how long after the last connection echoed its message the RSS is read")
	fs.DurationVar(&t.settleReap, "settle-reap", 10*time.Second, "table: rest before each round's reap phase (before its first server's run) when other phases ran\n"+
		"before it, so that the reaps are not measured while the machine recovers from the load before them (0: none)")
	fs.DurationVar(&t.trafficIdle, "idle-timeout-traffic", 5*time.Minute, "table: the servers' idle timeout outside the reap phase; 5m is cmd/echo's default")
	fs.IntVar(&t.size, "size", 64, "table: message payload `bytes`")
	fs.IntVar(&t.dialConc, "dial-concurrency", 128, "table: dials in flight at once, so that no SYN backlog overflows")
	fs.StringVar(&t.echoBin, "echo-bin", "", "table: the cmd/echo binary to measure as netwheel (default: go build it from the module here)")
	fs.StringVar(&t.harnessBin, "loadtest-bin", "", "table: the loadtest binary that drives the servers (default: go build it from the module here)")
	fs.StringVar(&t.refName, "reference", baseline.KindGnet, "table: the server the ratios are to")
	fs.StringVar(&t.phaseList, "phases", strings.Join(tablePhases, ","), "table: comma-separated phases to run, of "+strings.Join(tablePhases, ", ")+
		" (their rows alone are printed)")
	fs.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			names = append(names, f.Name)
		}
	})
	return t, names
}

// compareCmd parses the flags, runs the table and prints it.
func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", defaultTableServers, "comma-separated servers, in the table's column order: netwheel (cmd/echo), gnet, gnetafterfunc, netdeadline, nbio")
	rounds := fs.Int("rounds", defaultTableRounds, "rotations: every server runs once per round in every phase, the order changing each round")
	pause := fs.Duration("pause", 500*time.Millisecond, "pause between runs")
	t, _ := tableFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: compare [-servers LIST] [-rounds N] [flags]\n"+
			"       compare serve [-server KIND] [-listen ADDR] [-idle D]   one baseline server alone\n\n"+
			"Prints the table of docs/perf.md, \"The server against its baselines\": netwheel (cmd/echo with its\n"+
			"default settings) against its baselines, each server in a process of its own, driven by the loadtest\n"+
			"binary, phase by phase, in rounds of alternating order: closed-loop msgs/s, p99 latency and server CPU\n"+
			"time at a fixed rate, close error of idle connections reaped, RSS with connections open; then each\n"+
			"server's per-round ratios to the reference (bare gnet), their median and spread, and for the reaps,\n"+
			"which bare gnet never makes, each server's own median and spread over rounds. About five minutes at\n"+
			"the defaults (docs/perf.md's table: -rounds 3, about eight); for a quick look:\n"+
			"-conns-closed 50 -conns-fixed 200 -conns-idle 200 -conns-rss 200 -rounds 1; for one phase over more\n"+
			"rounds: -phases reap -rounds 6\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (compare takes flags only; run flags go to loadtest itself)", errUsage, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := checkTable(t, *servers, *rounds, *pause, set); err != nil {
		return err
	}
	return compareTable(ctx, t, stdout, stderr)
}

// checkTable validates the table's options, given the servers, rounds and
// pause, and the flags set.
func checkTable(t *tableOptions, servers string, rounds int, pause time.Duration, set map[string]bool) error {
	t.servers = nil
	for _, k := range strings.Split(servers, ",") {
		k = strings.TrimSpace(k)
		switch {
		case !slices.Contains([]string{kindNetwheel, baseline.KindGnet, baseline.KindGnetAfterFunc, baseline.KindNetDeadline, baseline.KindNbio}, k):
			return fmt.Errorf("%w: -servers: %q: want netwheel (cmd/echo), gnet, gnetafterfunc, netdeadline or nbio", errUsage, k)
		case slices.Contains(t.servers, k):
			return fmt.Errorf("%w: -servers: %s given twice", errUsage, k)
		}
		t.servers = append(t.servers, k)
	}
	t.phases = nil
	for _, ph := range strings.Split(t.phaseList, ",") {
		ph = strings.TrimSpace(ph)
		switch {
		case !slices.Contains(tablePhases, ph):
			return fmt.Errorf("%w: -phases: %q: want %s", errUsage, ph, strings.Join(tablePhases, ", "))
		case slices.Contains(t.phases, ph):
			return fmt.Errorf("%w: -phases: %s given twice", errUsage, ph)
		}
		t.phases = append(t.phases, ph)
	}
	t.phases = slices.DeleteFunc(slices.Clone(tablePhases), func(ph string) bool { return !slices.Contains(t.phases, ph) })
	t.reference = slices.Index(t.servers, t.refName)
	t.rounds, t.pause, t.spreadSet = rounds, pause, set["idle-spread"]
	switch {
	case len(t.servers) < 2:
		return fmt.Errorf("%w: -servers %q: want at least two servers", errUsage, servers)
	case t.reference < 0:
		return fmt.Errorf("%w: -reference %s is not among -servers", errUsage, t.refName)
	case rounds < 1 || rounds > 100:
		return fmt.Errorf("%w: -rounds %d: want 1 to 100", errUsage, rounds)
	case pause < 0:
		return fmt.Errorf("%w: -pause %s is negative", errUsage, pause)
	case t.closedConns < 1 || t.fixedConns < 1 || t.idleConns < 1 || t.rssConns < 1:
		return fmt.Errorf("%w: -conns-closed, -conns-fixed, -conns-idle and -conns-rss must be at least 1", errUsage)
	case t.closedFor <= 0 || t.fixedFor <= 0 || t.idleTimeout <= 0 || t.trafficIdle <= 0:
		return fmt.Errorf("%w: -duration-closed, -duration-fixed, -idle-timeout and -idle-timeout-traffic must be positive", errUsage)
	case t.rssHold < 0:
		return fmt.Errorf("%w: -hold-rss %s is negative", errUsage, t.rssHold)
	case t.settleReap < 0:
		return fmt.Errorf("%w: -settle-reap %s is negative", errUsage, t.settleReap)
	case t.dialConc < 1:
		return fmt.Errorf("%w: -dial-concurrency %d: want at least 1", errUsage, t.dialConc)
	}
	if t.echoBin != "" && !slices.Contains(t.servers, kindNetwheel) {
		return fmt.Errorf("%w: -echo-bin without netwheel among -servers", errUsage)
	}
	// What the harness would refuse, before any server starts.
	switch {
	case !(t.fixedRate > 0) || t.fixedRate > 1e6:
		return fmt.Errorf("%w: -rate-fixed %v: want more than 0 and at most 1e6 messages/s per connection", errUsage, t.fixedRate)
	case t.size < 1:
		return fmt.Errorf("%w: -size %d: want at least 1 byte", errUsage, t.size)
	case t.idleSpread < 0 || t.spreadSet && t.idleSpread > t.idleTimeout/2:
		return fmt.Errorf("%w: -idle-spread %s: want 0 to half of -idle-timeout (%s)", errUsage, t.idleSpread, t.idleTimeout)
	}
	t.netwheelArgs = strings.Join(echoArgs(t.trafficIdle), " ")
	if t.idleTimeout != t.trafficIdle {
		t.netwheelArgs += " (" + t.idleTimeout.String() + " in the reap phase)"
	}
	return nil
}

// conns returns how many connections a phase opens at once.
func (t *tableOptions) conns(phase string) int {
	switch phase {
	case phaseClosed:
		return t.closedConns
	case phaseFixed:
		return t.fixedConns
	case phaseReap:
		return t.idleConns
	}
	return t.rssConns
}

// phaseArgs returns the harness's run flags of a phase against addr.
func (t *tableOptions) phaseArgs(phase, addr string) []string {
	args := []string{"-addr", addr, "-proto", "raw", "-q", "-size", strconv.Itoa(t.size), "-dial-concurrency", strconv.Itoa(t.dialConc)}
	switch phase {
	case phaseClosed:
		args = append(args, "-scenario", "echo", "-closed", "-conns", strconv.Itoa(t.conns(phase)), "-duration", t.closedFor.String(),
			"-idle", t.trafficIdle.String())
	case phaseFixed:
		args = append(args, "-scenario", "echo", "-conns", strconv.Itoa(t.conns(phase)), "-duration", t.fixedFor.String(),
			"-rate", strconv.FormatFloat(t.fixedRate, 'g', -1, 64), "-idle", t.trafficIdle.String())
	case phaseReap:
		args = append(args, "-scenario", "idle", "-conns", strconv.Itoa(t.conns(phase)), "-idle", t.idleTimeout.String(), "-fins")
		if t.spreadSet {
			args = append(args, "-idle-spread", t.idleSpread.String())
		}
	}
	return args
}

// roundOrder returns the order in which round r (0-based) runs n servers:
// the list rotated by r/2, reversed in odd rounds, so that over two rounds
// every server runs once early and once late.
func roundOrder(n, r int) []int {
	out := make([]int, n)
	for j := range n {
		out[j] = (j + r/2) % n
	}
	if r%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// compareTable runs the table and prints it to stdout; progress goes to
// stderr, a line per run.
func compareTable(ctx context.Context, t *tableOptions, stdout, stderr io.Writer) error {
	fdLimit, err := limits.RaiseFiles()
	if err != nil {
		return err
	}
	most := 0
	for _, ph := range t.phases {
		most = max(most, t.conns(ph))
	}
	if uint64(most)+100 > fdLimit {
		return fmt.Errorf("%w: %d connections need as many open files in this process; the limit is %d", errUsage, most, fdLimit)
	}
	if (slices.Contains(t.servers, kindNetwheel) && t.echoBin == "") || t.harnessBin == "" {
		dir, err := os.MkdirTemp("", "compare-bin-")
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		defer os.RemoveAll(dir)
		if slices.Contains(t.servers, kindNetwheel) && t.echoBin == "" {
			fmt.Fprintf(stderr, "building %s\n", echoPackage)
			if t.echoBin, err = build(ctx, dir, echoPackage, "-echo-bin"); err != nil {
				return err
			}
		}
		if t.harnessBin == "" {
			fmt.Fprintf(stderr, "building %s\n", loadtestPackage)
			if t.harnessBin, err = build(ctx, dir, loadtestPackage, "-loadtest-bin"); err != nil {
				return err
			}
		}
	}
	figs := make([][]tableFigures, len(t.servers)) // [server][round]
	for i := range figs {
		figs[i] = make([]tableFigures, t.rounds)
		for r := range figs[i] {
			figs[i][r] = newTableFigures()
		}
	}
	var notes []string
	for r := range t.rounds {
		order := roundOrder(len(t.servers), r)
		for _, ph := range t.phases {
			if d := t.settleBefore(ph); d > 0 {
				fmt.Fprintf(stderr, "round %d/%d %-6s resting %s first\n", r+1, t.rounds, ph, d)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
			for _, i := range order {
				if err := ctx.Err(); err != nil {
					return err
				}
				kind := t.servers[i]
				f := &figs[i][r]
				start := time.Now()
				n, err := t.runPhase(ctx, ph, kind, f)
				if err != nil {
					return fmt.Errorf("compare: round %d, %s phase, %s: %w", r+1, ph, kind, err)
				}
				for _, s := range n {
					notes = append(notes, fmt.Sprintf("round %d, %s phase, %s: %s", r+1, ph, kind, s))
				}
				fmt.Fprintf(stderr, "round %d/%d %-6s %-14s %s  (%s)\n", r+1, t.rounds, ph, kind, progressLine(ph, f), time.Since(start).Round(10*time.Millisecond))
				time.Sleep(t.pause)
			}
		}
	}
	renderTable(stdout, t.tableSpec, figs, notes)
	return nil
}

// progressLine is a run's figures for the progress output.
func progressLine(phase string, f *tableFigures) string {
	switch phase {
	case phaseClosed:
		return fmt.Sprintf("%.0f msgs/s", f.closedRate)
	case phaseFixed:
		return fmt.Sprintf("p99 %s  server CPU %.2fs  %.0f msgs/s", dur(f.fixedP99), f.cpu, f.fixedRate)
	case phaseRSS:
		return fmt.Sprintf("RSS %.1f MiB at start, %.1f MiB with %d open", f.rssStart/(1<<20), f.rssOpen/(1<<20), f.rssConns)
	}
	if f.neverReaped() {
		return fmt.Sprintf("closed none of %d idle connections", f.reapExpected)
	}
	return fmt.Sprintf("close error p50 %s  p99 %s  max %s  (%d of %d closed)", dur(f.reapP50), dur(f.reapP99),
		dur(f.reapMax), f.reapClosed, f.reapExpected)
}

// dur formats a figure in nanoseconds for the progress output.
func dur(ns float64) string {
	if math.IsNaN(ns) {
		return "-"
	}
	return time.Duration(ns).Round(10 * time.Microsecond).String()
}

// startTableServer starts kind in a process of its own with the given idle
// timeout: netwheel is cmd/echo; the others are `compare serve`, serving
// at most life. With metrics set, the server serves its metrics there
// (the baselines then measure their close delay).
func (t *tableOptions) startTableServer(ctx context.Context, kind string, idle, life time.Duration, metrics string) (*serverProc, error) {
	var extra []string
	if metrics != "" {
		extra = []string{"-metrics", metrics}
	}
	if kind == kindNetwheel {
		return startEcho(ctx, t.echoBin, idle, extra...)
	}
	return startServe(ctx, kind, idle, life, extra...)
}

// metricsPortAttempts bounds the starts of a server process whose metrics
// port was taken between freeLoopbackAddr and its listen.
const metricsPortAttempts = 3

// metricsAddrFor picks the address of a child server's metrics:
// freeLoopbackAddr, or a test's stand-in.
var metricsAddrFor = freeLoopbackAddr

// freeLoopbackAddr returns a loopback address with a port free a moment
// ago, for a child server's metrics; the child may find it taken, and
// runPhase then tries another.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("compare: a port for the server's metrics: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// runPhase runs one phase against a fresh server process of kind and
// fills in its figures; it returns notes on what went wrong short of an
// error (connections that failed, messages lost, the harness's limits).
func (t *tableOptions) runPhase(ctx context.Context, phase, kind string, f *tableFigures) (notes []string, err error) {
	idle := t.trafficIdle
	if phase == phaseReap {
		idle = t.idleTimeout
	}
	var p *serverProc
	var metrics string
	for attempt := 1; ; attempt++ {
		metrics = ""
		if phase == phaseReap && kind != baseline.KindGnet { // bare gnet closes nothing: no close delay to serve
			if metrics, err = metricsAddrFor(); err != nil {
				return nil, err
			}
		}
		// The bound of a server whose client died; runPhase stops it.
		const life = 10 * time.Minute
		if p, err = t.startTableServer(ctx, kind, idle, life, metrics); err == nil {
			break
		}
		// The metrics port, free a moment ago, may have been taken since
		// (by another process's connection, say): try another.
		if metrics == "" || attempt == metricsPortAttempts || !errors.Is(err, errExitedEarly) {
			return nil, err
		}
	}
	defer func() {
		if serr := p.stop(); serr != nil && err == nil {
			err = fmt.Errorf("server process: %w", serr)
		}
	}()
	if phase == phaseRSS {
		return t.measureRSS(ctx, p.pid, p.addr, f)
	}
	args := t.phaseArgs(phase, p.addr)
	if metrics != "" {
		args = append(args, "-metrics", metrics)
	}
	var cpu0 time.Duration
	if phase == phaseFixed {
		if cpu0, err = limits.ProcCPU(p.pid); err != nil {
			return nil, err
		}
	}
	res, err := runHarness(ctx, t.harnessBin, args)
	if err != nil {
		return nil, err
	}
	if phase == phaseFixed {
		cpu1, err := limits.ProcCPU(p.pid)
		if err != nil {
			return nil, err
		}
		f.cpu = (cpu1 - cpu0).Seconds()
	}
	notes = append(notes, res.Limits...)
	for _, n := range res.Notes {
		if strings.HasPrefix(n, "quiet connections: the barrier gave up") || // run's note when the idle connections opened slowly
			strings.HasPrefix(n, "-fins: not done") { // why the wire row is empty
			notes = append(notes, n)
		}
	}
	switch phase {
	case phaseClosed, phaseFixed:
		e := res.scenario("echo")
		notes = append(notes, openNotes(e)...)
		if e.Lost > 0 {
			notes = append(notes, fmt.Sprintf("%d of %d messages not echoed", e.Lost, e.Sent))
		}
		rate := math.NaN()
		if e.Elapsed > 0 && e.Recv > 0 {
			rate = float64(e.Recv) / e.Elapsed.Seconds()
		}
		if phase == phaseClosed {
			f.closedRate = rate
			break
		}
		f.fixedRate = rate
		if n, ok := fixedShortfall(rate, t.fixedConns, t.fixedRate); ok {
			notes = append(notes, n)
		}
		if e.Latency.Count() > 0 {
			f.fixedP99 = float64(e.Latency.Quantile(0.99))
		}
	case phaseReap:
		s := res.scenario("idle")
		notes = append(notes, openNotes(s)...)
		f.reapExpected, f.reapClosed = s.Expected, int(s.ReapError.Count())
		if f.reapClosed > 0 {
			f.reapP50, f.reapP99, f.reapMax = float64(s.ReapError.Quantile(0.5)), float64(s.ReapError.Quantile(0.99)), float64(s.ReapError.Max())
			if a := s.ReapErrorAck; a != nil && a.Count() > 0 {
				f.reapAckP99 = float64(a.Quantile(0.99))
			}
			if w := s.ReapErrorWire; w != nil && w.Count() > 0 {
				f.reapWireP99 = float64(w.Quantile(0.99))
			}
			if cd := res.CloseDelay; cd != nil {
				if q, ok := cd.quantile(0.99); ok {
					f.reapOwnP99 = q * 1e9
				}
			}
			if n := s.NeverReaped + s.Late; n > 0 {
				notes = append(notes, fmt.Sprintf("%d of %d idle connections not closed within %s of their deadline", n, s.Expected, res.Config.Timeouts.Slack))
			}
			if len(s.WrongReason) > 0 {
				notes = append(notes, fmt.Sprintf("idle connections closed otherwise than by a FIN: %v", s.WrongReason))
			}
			if s.Early > 0 {
				notes = append(notes, fmt.Sprintf("%d idle connections closed early", s.Early))
			}
		}
		if n := s.Conns - s.Expected - sumValues(s.DialErrors); n > 0 {
			notes = append(notes, fmt.Sprintf("%d idle connections ended before their last message (%v)", n, s.Errors))
		}
	}
	return notes, nil
}

// fixedShortfall returns a note when the fixed-rate phase echoed fewer than
// 95% of the messages it offered (conns x perConn a second), and whether it
// did: the client and the server then ran at their capacity, and the p99
// measures a queue growing for the whole phase, not latency. A NaN rate
// (nothing echoed) is left to the other notes.
func fixedShortfall(echoed float64, conns int, perConn float64) (string, bool) {
	offered := float64(conns) * perConn
	if math.IsNaN(echoed) || offered <= 0 || echoed >= 0.95*offered {
		return "", false
	}
	return fmt.Sprintf("fixed rate not reached: %.0f msgs/s echoed of %.0f offered, so its p99 measures overload, not latency "+
		"(lower -rate-fixed or -conns-fixed)", echoed, offered), true
}

// openNotes notes the connections of a scenario that did not open.
func openNotes(s *scenario) []string {
	if s.Opened >= s.Conns {
		return nil
	}
	return []string{fmt.Sprintf("%d of %d connections did not open (%v)", s.Conns-s.Opened, s.Conns, s.DialErrors)}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// measureRSS reads the server's RSS (pid) before any connection, then
// opens t.rssConns connections to addr, echoes one message on each, waits
// t.rssHold and reads it again.
func (t *tableOptions) measureRSS(ctx context.Context, pid int, addr string, f *tableFigures) ([]string, error) {
	rss0, err := limits.RSS(pid)
	if err != nil {
		return nil, err
	}
	conns, failed := holdConns(ctx, addr, t.rssConns, t.dialConc, t.size)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-time.After(t.rssHold):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rss1, err := limits.RSS(pid)
	if err != nil {
		return nil, err
	}
	f.rssStart, f.rssOpen, f.rssConns = float64(rss0), float64(rss1), len(conns)
	var notes []string
	if failed > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d connections failed to open or to echo; RSS read with %d", failed, t.rssConns, len(conns)))
	}
	return notes, nil
}

// holdConns opens n connections to addr, at most conc at a time, and
// echoes one size-byte message on each, so that the server has served
// every one; it returns those that did, open, and how many failed.
func holdConns(ctx context.Context, addr string, n, conc, size int) ([]net.Conn, int) {
	msg := []byte(strings.Repeat("x", size))
	conns := make([]net.Conn, n)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	d := net.Dialer{Timeout: 5 * time.Second}
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			buf := make([]byte, size)
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err = c.Write(msg); err == nil {
				_, err = io.ReadFull(c, buf)
			}
			if err != nil {
				_ = c.Close()
				return
			}
			_ = c.SetDeadline(time.Time{})
			conns[i] = c
		})
	}
	wg.Wait()
	open := slices.DeleteFunc(conns, func(c net.Conn) bool { return c == nil })
	return open, n - len(open)
}
