package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
)

// This file drives the harness as its users do: the loadtest binary in a
// process of its own, whose -json result is read back.

// Packages compare builds when not given binaries: bench's go.mod lists
// them as tools, so that they build from this module.
const (
	echoPackage     = "github.com/netwheel/netwheel/cmd/echo"
	loadtestPackage = "github.com/netwheel/netwheel/loadtest"
)

// build builds the main package pkg into dir with the go command, as the
// module in the current directory has it (bench's, or netwheel's), and
// returns the binary's path; flag names the flag that gives a built
// binary instead.
func build(ctx context.Context, dir, pkg, flag string) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("compare: building %s: %w (give a built binary with %s)", pkg, err, flag)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.CommandContext(ctx, goCmd, "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("compare: go build %s: %w\n%s(run compare from the bench module, or give a built binary with %s)", pkg, err, out, flag)
	}
	return bin, nil
}

// runHarness runs the loadtest binary bin with args and returns the result
// it wrote. A run whose checks failed (exit status 1) or that was not
// judged (3) still measured: its result is returned like any other.
func runHarness(ctx context.Context, bin string, args []string) (*result, error) {
	dir, err := os.MkdirTemp("", "compare-run-")
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "result.json")
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(args), "-q", "-json", path)...)
	setParentDeathSignal(cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && (exit.ExitCode() == 1 || exit.ExitCode() == 3)) {
		return nil, fmt.Errorf("compare: loadtest %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("compare: loadtest wrote no result: %w\n%s", err, stderr.String())
	}
	defer f.Close()
	var r result
	if err := json.NewDecoder(f).Decode(&r); err != nil {
		return nil, fmt.Errorf("compare: reading loadtest's result: %w", err)
	}
	if r.Version != resultVersion {
		return nil, fmt.Errorf("compare: loadtest's result is version %d; compare reads version %d", r.Version, resultVersion)
	}
	return &r, nil
}

// resultVersion is the version of loadtest's JSON result that result
// reads (loadtest's report.Version).
const resultVersion = 1

// result is the part of loadtest's JSON result that the table reads.
type result struct {
	Version int `json:"version"`
	Config  struct {
		Timeouts struct {
			Slack time.Duration `json:"slack"`
		} `json:"timeouts"`
	} `json:"config"`
	Limits     []string         `json:"limits"`
	Notes      []string         `json:"notes"`
	Scenarios  []*scenario      `json:"scenarios"`
	CloseDelay *serverHistogram `json:"close_delay"`
}

// scenario is the part of a scenario's figures the table reads; the
// histograms are in nanoseconds.
type scenario struct {
	Name          string          `json:"name"`
	Conns         int             `json:"conns"`
	Opened        int             `json:"opened"`
	DialErrors    map[string]int  `json:"dial_errors"`
	Elapsed       time.Duration   `json:"elapsed"`
	Sent          uint64          `json:"sent"`
	Recv          uint64          `json:"recv"`
	Lost          uint64          `json:"lost"`
	Errors        map[string]int  `json:"errors"`
	Latency       *hist.Histogram `json:"latency"`
	Expected      int             `json:"expected"`
	WrongReason   map[string]int  `json:"wrong_reason"`
	NeverReaped   int             `json:"never_reaped"`
	Late          int             `json:"late"`
	Early         int             `json:"early"`
	ReapError     *hist.Histogram `json:"reap_error"`
	ReapErrorAck  *hist.Histogram `json:"reap_error_ack"`
	ReapErrorWire *hist.Histogram `json:"reap_error_wire"`
}

// scenario returns the named scenario's figures, or empty ones if the run
// had none.
func (r *result) scenario(name string) *scenario {
	for _, s := range r.Scenarios {
		if s.Name == name {
			return s
		}
	}
	return &scenario{Name: name, Latency: &hist.Histogram{}, ReapError: &hist.Histogram{}}
}

// serverHistogram is a server's own Prometheus histogram as loadtest
// writes it: cumulative counts at upper bounds in seconds, Count being
// the +Inf bucket.
type serverHistogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Count  uint64    `json:"count"`
}

// quantile returns the upper bound, in seconds, of the bucket holding the
// q-quantile (+Inf above the last bound), and false if h is empty.
func (h *serverHistogram) quantile(q float64) (float64, bool) {
	if h.Count == 0 {
		return 0, false
	}
	rank := min(max(uint64(math.Ceil(q*float64(h.Count))), 1), h.Count)
	i, _ := slices.BinarySearch(h.Counts, rank)
	if i >= len(h.Bounds) {
		return math.Inf(1), true
	}
	return h.Bounds[i], true
}
