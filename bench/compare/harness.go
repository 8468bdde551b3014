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
// reads (docs/results.md).
const resultVersion = 2

// result is the part of loadtest's JSON result that the table reads.
type result struct {
	Version int `json:"version"`
	Config  struct {
		Timeouts struct {
			Slack goDuration `json:"slack"`
		} `json:"timeouts"`
	} `json:"config"`
	Limits     []string         `json:"limits"`
	Notes      []string         `json:"notes"`
	Scenarios  []*scenario      `json:"scenarios"`
	CloseDelay *serverHistogram `json:"close_delay"`
}

// goDuration is a duration as loadtest's result writes it: a Go duration
// string.
type goDuration time.Duration

func (d *goDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = goDuration(v)
	return err
}

func (d goDuration) String() string { return time.Duration(d).String() }

// scenario is the part of a scenario's figures the table reads; the
// histograms are in nanoseconds. ReapError is the close error from the
// client's send of the last message, ReapErrorAck from the server's
// answer, ReapErrorWire the server's FIN's from the send.
type scenario struct {
	Name          string
	Conns         int
	Opened        int
	DialErrors    map[string]int
	Elapsed       time.Duration
	Sent          uint64
	Recv          uint64
	Lost          uint64
	Errors        map[string]int
	Latency       *hist.Histogram
	Expected      int
	WrongReason   map[string]int
	NeverReaped   int
	Late          int
	Early         int
	ReapError     *hist.Histogram
	ReapErrorAck  *hist.Histogram
	ReapErrorWire *hist.Histogram
}

// UnmarshalJSON reads a scenario of the result's format.
func (s *scenario) UnmarshalJSON(b []byte) error {
	var w struct {
		Name       string          `json:"name"`
		Conns      int             `json:"conns"`
		Opened     int             `json:"opened"`
		DialErrors map[string]int  `json:"dial_errors"`
		Elapsed    goDuration      `json:"elapsed"`
		Sent       uint64          `json:"sent"`
		Answered   uint64          `json:"answered"`
		Lost       uint64          `json:"lost"`
		Errors     map[string]int  `json:"errors"`
		Latency    *hist.Histogram `json:"latency_ns"`
		Closes     *struct {
			Expected    int             `json:"expected"`
			OtherReason map[string]int  `json:"other_reason"`
			Never       int             `json:"never"`
			Late        int             `json:"late"`
			Early       int             `json:"early"`
			Refused     int             `json:"refused"`
			NotStarted  int             `json:"not_started"`
			FromStart   *hist.Histogram `json:"close_error_from_start_ns"`
			FromEnd     *hist.Histogram `json:"close_error_from_end_ns"`
			Wire        *hist.Histogram `json:"close_error_wire_ns"`
		} `json:"closes"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = scenario{Name: w.Name, Conns: w.Conns, Opened: w.Opened, DialErrors: w.DialErrors, Elapsed: time.Duration(w.Elapsed),
		Sent: w.Sent, Recv: w.Answered, Lost: w.Lost, Errors: w.Errors, Latency: w.Latency, ReapError: &hist.Histogram{}}
	if s.Latency == nil {
		s.Latency = &hist.Histogram{}
	}
	if c := w.Closes; c != nil {
		// Expected: the connections whose timer started, as the table
		// counts them (those refused or not started end before).
		s.Expected, s.WrongReason, s.NeverReaped, s.Late, s.Early = c.Expected-c.Refused-c.NotStarted, c.OtherReason, c.Never, c.Late, c.Early
		s.ReapErrorAck, s.ReapErrorWire = c.FromEnd, c.Wire
		if c.FromStart != nil {
			s.ReapError = c.FromStart
		}
	}
	return nil
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
