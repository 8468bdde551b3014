// Command loadtest drives netwheel's echo server, or any TCP echo server,
// with many connections and reports what its timers did: echo throughput
// and latency, idle connections reaped on time, dead peers detected,
// retransmission at work, slowloris trickles cut off, churn absorbed; and
// what it did with peers that misbehave (non-readers, split writes, ping
// and connection floods, garbage), and how its memory grew meanwhile.
//
//	go run ./loadtest                          embedded netwheel server, every scenario
//	go run ./loadtest -server gnetafterfunc    a baseline server, raw protocol
//	go run ./loadtest -addr 127.0.0.1:7000 -proto raw -scenario echo
//	go run ./loadtest report a.json b.json     re-render or merge results
//	go run ./loadtest compare                  netwheel (cmd/echo) against the baselines:
//	                                           the table of docs/perf.md, "The server
//	                                           against its baselines", with per-round ratios
//	go run ./loadtest compare -separate -- -proto raw -closed
//	                                           one echo run, servers in rotation: msgs/s and ratios
//	go run ./loadtest serve -server gnet       a server alone, for a client elsewhere
//
// Every run is bounded in time and connections and stops by itself. See
// -h for the flags, README.md ("Load-test any server") for driving a server
// of your own, and docs/perf.md for the results it gives.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/netwheel/netwheel/loadtest/internal/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, errJudged) {
			os.Exit(1)
		}
		if errors.Is(err, flag.ErrHelp) {
			return // the help is written: exit 0, as cmd/echo -h does
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "report" {
		return reportCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "serve" {
		return serveCmd(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "compare" {
		return compareCmd(ctx, args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	stopProf, err := startCPUProfile(o.cpuProf)
	if err != nil {
		return err
	}
	res, err := run(ctx, o, stdout)
	if perr := stopProf(); err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if err := output(res, o.jsonPath, o.plotPath, stdout); err != nil {
		return err
	}
	if res.Failures() > 0 {
		return errJudged
	}
	return nil
}

// errJudged is realMain's error when the run completed but some of its
// judgements failed (the report says which): the exit status is 1.
var errJudged = errors.New("loadtest: some checks failed")

// output renders res as text to stdout, and to the JSON and plot files if
// asked.
func output(res *report.Result, jsonPath, plotPath string, stdout io.Writer) error {
	report.Text(stdout, res)
	if jsonPath != "" {
		if err := writeFile(jsonPath, func(w io.Writer) error { return report.JSON(w, res) }); err != nil {
			return err
		}
	}
	if plotPath != "" {
		draw := report.SVG
		if filepath.Ext(plotPath) == ".html" {
			draw = report.HTML
		}
		if err := writeFile(plotPath, func(w io.Writer) error { return draw(w, res) }); err != nil {
			return err
		}
	}
	return nil
}

// startCPUProfile starts a CPU profile to path ("" : none); the returned
// function stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("loadtest: cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

func writeFile(path string, f func(io.Writer) error) error {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	if err := f(file); err != nil {
		file.Close()
		return fmt.Errorf("loadtest: writing %s: %w", path, err)
	}
	return file.Close()
}

// reportCmd re-renders one result file or merges several.
func reportCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadtest report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonPath := fs.String("json", "", "write the merged result to `FILE`")
	plotPath := fs.String("plot", "", "draw the merged distributions to `FILE.svg` or FILE.html")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: loadtest report needs at least one result FILE (written by -json)", errUsage)
	}
	if p := *plotPath; p != "" && filepath.Ext(p) != ".svg" && filepath.Ext(p) != ".html" {
		return fmt.Errorf("%w: -plot %q: want a .svg or .html file", errUsage, p)
	}
	var rs []*report.Result
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("loadtest: %w", err)
		}
		r, err := report.ReadJSON(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("loadtest: %s: %w", path, err)
		}
		rs = append(rs, r)
	}
	res, err := report.Merge(rs...)
	if err != nil {
		return err
	}
	return output(res, *jsonPath, *plotPath, stdout)
}
