package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary stand in for compare when the table starts
// `compare serve` from os.Executable.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			// As main does: the parent quotes what the child said.
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built holds the binaries the tests build once: cmd/echo and loadtest.
var built struct {
	once               sync.Once
	dir, echo, harness string
	err                error
}

// binaries builds cmd/echo and loadtest from this module (once per test
// binary) and returns their paths.
func binaries(t *testing.T) (echo, harness string) {
	t.Helper()
	built.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if built.dir, built.err = os.MkdirTemp("", "compare-test-"); built.err != nil {
			return
		}
		if built.echo, built.err = build(ctx, built.dir, echoPackage, "-echo-bin"); built.err != nil {
			return
		}
		built.harness, built.err = build(ctx, built.dir, loadtestPackage, "-loadtest-bin")
	})
	require.NoError(t, built.err)
	return built.echo, built.harness
}

func TestServe_Refuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "not loopback", args: []string{"-listen", "0.0.0.0:0"}, want: "loopback only"},
		{name: "unknown server", args: []string{"-server", "nginx"}, want: "unknown server kind"},
		{name: "no metrics without timers", args: []string{"-server", "gnet", "-metrics", "127.0.0.1:0", "-for", "5s"}, want: "no metrics to serve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := realMain(context.Background(), append([]string{"serve"}, tt.args...), &out, &errOut)
			require.ErrorIs(t, err, errUsage)
			assert.ErrorContains(t, err, tt.want)
			assert.NotContains(t, out.String(), "listening", "it stopped before announcing itself")
		})
	}
}

// TestRunHarness drives a baseline with the loadtest binary and reads its
// result back; a run whose checks failed is still a result.
func TestRunHarness(t *testing.T) {
	_, harness := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := startServe(ctx, "gnet", 0, time.Minute)
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.stop()) }()
	r, err := runHarness(ctx, harness, []string{"-addr", p.addr, "-proto", "raw", "-scenario", "echo,idle", "-conns", "5",
		"-duration", "300ms", "-idle", "200ms", "-slack", "100ms"})
	require.NoError(t, err, "bare gnet never reaps: the idle check fails, exit status 1")
	e := r.scenario("echo")
	assert.Equal(t, 5, e.Opened)
	assert.Positive(t, e.Recv)
	assert.Equal(t, e.Recv, e.Latency.Count())
	idle := r.scenario("idle")
	assert.Equal(t, 5, idle.Expected)
	assert.Equal(t, 5, idle.NeverReaped, "gnet has no timers")
	assert.Equal(t, 100*time.Millisecond, time.Duration(r.Config.Timeouts.Slack))

	_, err = runHarness(ctx, harness, []string{"-addr", "localhost"})
	assert.ErrorContains(t, err, "HOST:PORT", "a usage error is an error, with loadtest's words")
	_, err = runHarness(ctx, filepath.Join(t.TempDir(), "none"), nil)
	assert.Error(t, err)
}

func TestServerHistogram_Quantile(t *testing.T) {
	h := &serverHistogram{Bounds: []float64{0.001, 0.002, 0.005}, Counts: []uint64{5, 9, 9}, Count: 10}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{0, 0.001}, {0.5, 0.001}, {0.6, 0.002}, {0.9, 0.002}, {0.99, math.Inf(1)}} {
		got, ok := h.quantile(tc.q)
		require.True(t, ok)
		assert.Equal(t, tc.want, got, "q=%v", tc.q)
	}
	_, ok := (&serverHistogram{}).quantile(0.5)
	assert.False(t, ok)
}
