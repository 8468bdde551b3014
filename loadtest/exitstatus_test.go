package main

import (
	"errors"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain_ExitStatus runs the harness as a process of its own: the help
// and the version exit 0, a run that cannot be made 1, bad flags and
// files that cannot be merged 2.
func TestMain_ExitStatus(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	tests := []struct {
		name string
		args []string
		want int
		// within bounds the run's time, and oneLine says it fails in one
		// line (0, false: not checked).
		within  time.Duration
		oneLine bool
	}{
		{name: "help", args: []string{"-h"}, want: 0},
		{name: "version", args: []string{"-version"}, want: 0},
		{name: "unknown flag", args: []string{"-no-such-flag"}, want: 2},
		{name: "bad value", args: []string{"-conns", "many"}, want: 2},
		{name: "report of no file", args: []string{"report", t.TempDir() + "/missing.json"}, want: 2},
		{name: "refused address", args: []string{"-addr", "127.0.0.1:1", "-q"}, want: 1},
		{name: "listener that never accepts", args: []string{"-addr", neverAccepts(t), "-q"}, want: 1, within: 5 * time.Second, oneLine: true},
		{name: "no connections", args: []string{"-conns", "0"}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(exe, tt.args...)
			cmd.Env = append(os.Environ(), envAsMain+"=1")
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if tt.within > 0 {
				assert.Less(t, time.Since(start), tt.within, "output:\n%s", out)
			}
			if tt.oneLine {
				assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(out)), "\n")+1, "one line:\n%s", out)
			}
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, code, "output:\n%s", out)
		})
	}
}

// neverAccepts returns the address of a listener that accepts nothing:
// the kernel completes the handshakes into its backlog, and no byte ever
// comes back.
func neverAccepts(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// verdict judges one scenario's figures alone and returns its failed
// checks' lines.
func verdict(s *report.Scenario) []string {
	return (&report.Result{Scenarios: []*report.Scenario{s}}).Judge().Scenario(s.Name).Lines()
}
