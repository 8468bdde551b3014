package main

import (
	"errors"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"os"
	"os/exec"
	"testing"

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
	}{
		{name: "help", args: []string{"-h"}, want: 0},
		{name: "version", args: []string{"-version"}, want: 0},
		{name: "unknown flag", args: []string{"-no-such-flag"}, want: 2},
		{name: "bad value", args: []string{"-conns", "many"}, want: 2},
		{name: "report of no file", args: []string{"report", t.TempDir() + "/missing.json"}, want: 2},
		{name: "refused address", args: []string{"-addr", "127.0.0.1:1", "-q"}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(exe, tt.args...)
			cmd.Env = append(os.Environ(), envAsMain+"=1")
			out, err := cmd.CombinedOutput()
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

// verdict judges one scenario's figures alone and returns its failed
// checks' lines.
func verdict(s *report.Scenario) []string {
	return (&report.Result{Scenarios: []*report.Scenario{s}}).Judge().Scenario(s.Name).Lines()
}
