package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// kindNetwheelOff is compare's name for the embedded netwheel server with
// every timeout the harness controls set to zero (idle, keepalive, frame).
// Retransmission cannot be turned off: with the framed protocol its timer
// is still armed for every DATA the server sends, with retransmit's
// defaults.
const kindNetwheelOff = "netwheel-notimers"

// compareRun is one server's echo figures in one round.
type compareRun struct {
	rate     float64 // echoed messages/s
	p50, p99 int64   // latency, ns
	lost     uint64
}

// compareCmd prints the table of docs/perf.md, "The server against its
// baselines" (table.go), or, given run flags after --, runs that echo
// scenario against several embedded servers in rotation, rounds times,
// with the same flags, and prints each server's throughput and its ratio
// to the first server, computed per round, so that noise on a shared
// machine hits every server alike.
func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadtest compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", defaultTableServers, "comma-separated servers, in the table's column order: netwheel (cmd/echo), gnet, gnetafterfunc, netdeadline, nbio;\n"+
		"with run flags, embedded servers (netwheel, netwheel-notimers, gnet, netdeadline, gnetafterfunc, nbio), the first being the reference of the ratios\n"+
		"(there the default is gnet,netwheel,netdeadline,gnetafterfunc)")
	rounds := fs.Int("rounds", defaultTableRounds, "rotations: every server runs once per round (in every phase of the table), the order changing each round\n"+
		"(with run flags the default is 5)")
	pause := fs.Duration("pause", 500*time.Millisecond, "pause between runs")
	separate := fs.Bool("separate", false, "with run flags: run each server in its own process (loadtest serve) instead of embedded in the client's\n"+
		"(the table always does)")
	t, tableNames := tableFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadtest compare [-servers LIST] [-rounds N] [table flags]\n"+
			"       loadtest compare [-servers LIST] [-rounds N] [-separate] -- RUN FLAGS\n\n"+
			"Without run flags, prints the table of docs/perf.md, \"The server against its baselines\": netwheel (cmd/echo\n"+
			"with its default settings) against its baselines, each server in a process of its own, phase by phase, in\n"+
			"rounds of alternating order: closed-loop msgs/s, p99 latency and server CPU time at a fixed rate, close error\n"+
			"of idle connections reaped, RSS with connections open; then each server's per-round ratios to the reference\n"+
			"(bare gnet), their median and spread, and for the reaps, which bare gnet never makes, each server's own median\n"+
			"and spread over rounds. About five minutes at the defaults (docs/perf.md's table: -rounds 3, about eight);\n"+
			"for a quick look: -conns-closed 50 -conns-fixed 200 -conns-idle 200 -conns-rss 200 -rounds 1;\n"+
			"for one phase over more rounds: -phases reap -rounds 6\n\n"+
			"With run flags after --, runs that echo scenario against each server in turn and prints msgs/s and ratios.\n"+
			"Example: loadtest compare -separate -rounds 5 -- -proto raw -closed -conns 100 -duration 5s\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() == 0 {
		if err := checkTable(t, *servers, *rounds, *pause, set); err != nil {
			return err
		}
		return compareTable(ctx, t, stdout, stderr)
	}
	for _, n := range tableNames {
		if set[n] {
			return fmt.Errorf("%w: -%s is a flag of the table (compare without run flags), not of the echo comparison", errUsage, n)
		}
	}
	if !set["servers"] {
		*servers = "gnet,netwheel,netdeadline,gnetafterfunc"
	}
	if !set["rounds"] {
		*rounds = 5
	}
	kinds := strings.Split(*servers, ",")
	switch {
	case *rounds < 1 || *rounds > 100:
		return fmt.Errorf("%w: -rounds %d: want 1 to 100", errUsage, *rounds)
	case len(kinds) < 2:
		return fmt.Errorf("%w: -servers %q: want at least two servers", errUsage, *servers)
	case *pause < 0:
		return fmt.Errorf("%w: -pause %s is negative", errUsage, *pause)
	}
	runArgs := fs.Args()
	opts := make([]*options, len(kinds))
	for i, k := range kinds {
		k = strings.TrimSpace(k)
		kinds[i] = k
		o, err := compareOptions(k, runArgs, stderr)
		if err != nil {
			return err
		}
		opts[i] = o
	}
	got := make([][]compareRun, len(kinds)) // [server][round]
	for r := range *rounds {
		for j := range kinds {
			i := (r + j) % len(kinds)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			o := opts[i]
			var stop func() error
			if *separate {
				p, err := startServe(ctx, kinds[i], runArgs, hardBound(o)+time.Minute)
				if err != nil {
					return fmt.Errorf("loadtest compare: round %d, %s: %w", r+1, kinds[i], err)
				}
				c := *o
				c.addr, c.server, c.cpuProf = p.addr, "external", ""
				o, stop = &c, p.stop
			}
			res, err := run(ctx, o, io.Discard)
			if stop != nil {
				if serr := stop(); err == nil && serr != nil {
					err = fmt.Errorf("server process: %w", serr)
				}
			}
			if err != nil {
				return fmt.Errorf("loadtest compare: round %d, %s: %w", r+1, kinds[i], err)
			}
			e := res.Scenario(attack.Echo)
			cr := compareRun{lost: e.Lost, p50: e.Latency.Quantile(0.5), p99: e.Latency.Quantile(0.99)}
			if e.Elapsed > 0 {
				cr.rate = float64(e.Recv) / e.Elapsed.Seconds()
			}
			got[i] = append(got[i], cr)
			fmt.Fprintf(stderr, "round %d/%d %-18s %10.0f msgs/s  p50 %s  p99 %s  lost %d\n", r+1, *rounds, kinds[i], cr.rate,
				report.D(cr.p50), report.D(cr.p99), cr.lost)
			time.Sleep(*pause)
		}
	}
	o := opts[0]
	mode := "open loop"
	if o.closed {
		mode = "closed loop"
	}
	where := "servers embedded in the client's process"
	if *separate {
		where = "each server in its own process"
	}
	fmt.Fprintf(stdout, "echo, %s protocol, %s, %d connections, %d-byte messages, %s per run, %d rounds, %s\n",
		o.proto, mode, o.conns, o.size, o.duration, *rounds, where)
	fmt.Fprintf(stdout, "%-18s %12s %12s %12s  %-28s %10s %10s\n", "server", "msgs/s med", "min", "max", "ratio to "+kinds[0]+" med [min-max]", "p50 med", "p99 med")
	for i, k := range kinds {
		rates, ratios, p50s, p99s := make([]float64, 0, *rounds), make([]float64, 0, *rounds), []int64{}, []int64{}
		for r, cr := range got[i] {
			rates = append(rates, cr.rate)
			if ref := got[0][r].rate; ref > 0 {
				ratios = append(ratios, cr.rate/ref)
			}
			p50s, p99s = append(p50s, cr.p50), append(p99s, cr.p99)
		}
		fmt.Fprintf(stdout, "%-18s %12.0f %12.0f %12.0f  %-28s %10s %10s\n", k, median(rates), slices.Min(rates), slices.Max(rates),
			fmt.Sprintf("%.3f [%.3f-%.3f]", median(ratios), slices.Min(ratios), slices.Max(ratios)),
			report.D(int64(median(toFloat(p50s)))), report.D(int64(median(toFloat(p99s)))))
	}
	return nil
}

// compareOptions parses the run flags for one server of a comparison: the
// echo scenario only, quiet, on the given embedded server.
func compareOptions(kind string, runArgs []string, stderr io.Writer) (*options, error) {
	server := kind
	if kind == kindNetwheelOff {
		server = kindNetwheel
	}
	args := append([]string{"-server", server, "-scenario", "echo", "-q"}, runArgs...)
	o, err := parseFlags(args, stderr)
	if err != nil {
		return nil, fmt.Errorf("loadtest compare: %s: %w", kind, err)
	}
	if o.addr != "" {
		return nil, fmt.Errorf("%w: compare runs embedded servers; -addr is not allowed", errUsage)
	}
	if kind == kindNetwheelOff {
		t := &o.timeouts
		t.Idle, t.KeepaliveTime, t.KeepaliveTimeout, t.KeepaliveCount, t.Frame = 0, 0, 0, 0, 0
	}
	return o, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is not modified. It returns 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func toFloat(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
