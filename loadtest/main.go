// Command loadtest drives netwheel's echo server, or any TCP server (an
// echo server, or another protocol through -payload, -expect or -preset),
// with many connections and reports what its timers did (idle, handshake,
// keepalive, retransmit, frame deadline), what it did with peers that
// misbehave, and how its memory grew meanwhile.
//
//	go run ./loadtest                          embedded netwheel server, every scenario
//	go run ./loadtest -addr 127.0.0.1:6379 -preset redis -scenario idle -idle 3s
//	go run ./loadtest -shard 2/4 -json s2.json one shard of a test spread over processes
//	go run ./loadtest report a.json b.json     re-render or merge results
//
// The exit status is 0 when every judgement passed, 1 when one failed or
// the run could not be made (a server at -addr that does not answer within
// 3 s), 2 for bad flags or result files that cannot be read or merged, and
// 3 when none failed but some were not judged because the harness itself
// was starved of the CPU. `go run` reports any failure as 1: build the
// binary where the status matters. The results file is documented in
// docs/results.md; see README.md ("Load-test any server") and -h.
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

	"github.com/netwheel/netwheel/internal/version"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, errJudged) {
			os.Exit(1)
		}
		if errors.Is(err, errStarved) {
			os.Exit(3)
		}
		if errors.Is(err, flag.ErrHelp) {
			return // the help is written: exit 0, as cmd/echo -h does
		}
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, errUsage) {
			os.Exit(2) // the command line
		}
		os.Exit(1) // the run: a server that cannot be reached, a file not written...
	}
}

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "report" {
		return reportCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "compare" || args[0] == "serve") {
		return fmt.Errorf("%w: loadtest %s moved to the bench module: cd bench && go run ./compare -h", errUsage, args[0])
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return usage(err)
	}
	if o.version {
		fmt.Fprintln(stdout, version.String("loadtest"))
		return nil
	}
	if err := checkOutputs(o.jsonPath, o.plotPath); err != nil {
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
	return output(res, o.jsonPath, o.plotPath, stdout)
}

// judged returns the error that gives a judgement's exit status
// (Judgement.ExitStatus): errJudged (1), errStarved (3) or nil (0).
func judged(j *report.Judgement) error {
	switch j.ExitStatus() {
	case 1:
		return errJudged
	case 3:
		return errStarved
	}
	return nil
}

// usage marks a command-line error as errUsage (exit status 2), leaving
// nil and -h's flag.ErrHelp (exit status 0) as they are.
func usage(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}

// errJudged is realMain's error when the run completed but some of its
// judgements failed (the report says which): the exit status is 1.
var errJudged = errors.New("loadtest: some checks failed")

// errStarved is realMain's error when no judgement failed but some checks
// of timing were not judged, because the harness itself was starved of
// the CPU (the report says how): the exit status is 3, neither a pass nor
// a failure of the server.
var errStarved = errors.New("loadtest: some checks not judged: the load generator was starved")

// output judges res once and renders the judgement as text to stdout,
// and to the JSON and plot files if asked; it returns the judgement's
// exit status as judged does, or the error of a file not written.
func output(res *report.Result, jsonPath, plotPath string, stdout io.Writer) error {
	j := res.Judge()
	report.Text(stdout, res, j)
	if jsonPath != "" {
		if err := writeFile(jsonPath, func(w io.Writer) error { return report.JSON(w, res, j) }); err != nil {
			return err
		}
	}
	if plotPath != "" {
		draw := func(w io.Writer) error { return report.SVG(w, res) }
		if filepath.Ext(plotPath) == ".html" {
			draw = func(w io.Writer) error { return report.HTML(w, res, j) }
		}
		if err := writeFile(plotPath, draw); err != nil {
			return err
		}
	}
	return judged(j)
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
		return usage(err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: loadtest report needs at least one result FILE (written by -json)", errUsage)
	}
	if err := checkOutputs(*jsonPath, *plotPath); err != nil {
		return err
	}
	var rs []*report.Result
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		r, err := report.ReadJSON(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", errUsage, path, err)
		}
		rs = append(rs, r)
	}
	res, err := report.Merge(rs...)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return output(res, *jsonPath, *plotPath, stdout) // the merged verdict's exit status, as a run's
}
