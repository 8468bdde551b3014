package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/fdlimit"
)

// runChild runs echo as a process of its own with args and returns its exit
// status and stderr.
func runChild(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asEchoEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("echo %v: %v\n%s", args, err, stderr.String())
	return -1, ""
}

// TestMain_ExitStatus runs the binary, as users do, on each bad input: a
// flag or a setting the library refuses exits 2 with the library's words,
// a failure at run time exits 1.
func TestMain_ExitStatus(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	const rule = "is negative: 0 means the default, -1 (Off) turns it off"
	loops := 4*runtime.NumCPU() + 1
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "unknown flag", args: []string{"-idle", "1s"}, code: 2, want: "flag provided but not defined: -idle"},
		{name: "idle typo", args: []string{"-idle-timeout", "-5s"}, code: 2, want: "IdleTimeout -5s " + rule},
		{name: "idle off in seconds", args: []string{"-idle-timeout", "-1s"}, code: 2, want: "IdleTimeout -1s " + rule},
		{name: "max conns typo", args: []string{"-max-conns", "-5"}, code: 2, want: "MaxConns -5 " + rule},
		{name: "shutdown typo", args: []string{"-shutdown-timeout", "-1s"}, code: 2, want: "-shutdown-timeout -1s " + rule},
		{name: "frame deadline below the tick", args: []string{"-proto", "framed", "-frame-timeout", "1ns"}, code: 2,
			want: "FrameTimeout 1ns is shorter than the timer wheel's tick 1ms"},
		{name: "frame timeout with raw", args: []string{"-frame-timeout", "1s"}, code: 2, want: "-frame-timeout needs -proto framed"},
		{name: "event loops", args: []string{"-event-loops", fmt.Sprint(loops)}, code: 2,
			want: fmt.Sprintf("EventLoops %d is beyond 4 per core", loops)},
		{name: "tick", args: []string{"-tick", "50us"}, code: 2, want: "Tick: wheel: tick out of range"},
		{name: "bad metrics address", args: []string{"-metrics", "bad"}, code: 2, want: `-metrics "bad": address bad: missing port in address`},
		{name: "bad address", args: []string{"-addr", "bad"}, code: 2, want: `Addr "bad": address bad: missing port in address`},
		{name: "address in use", args: []string{"-addr", busy.Addr().String()}, code: 1, want: "echo: start"},
		{name: "metrics address in use", args: []string{"-metrics", busy.Addr().String()}, code: 1, want: "echo: metrics listener"},
	}
	if files := fdlimit.OpenFiles(); files > 0 && files < 1e9 {
		tests = append(tests, struct {
			name string
			args []string
			code int
			want string
		}{name: "max conns above the open-file limit", args: []string{"-max-conns", "1000000000"}, code: 2,
			want: fmt.Sprintf("MaxConns 1000000000 is above the open-file limit %d", files)})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runChild(t, append([]string{"-addr", "127.0.0.1:0"}, tc.args...)...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Contains(t, stderr, tc.want)
		})
	}
}

// With no connection, a shutdown cuts nothing: echo exits 0 whatever the
// grace period, none (off, -1) or the default (0).
func TestMain_ShutdownWithNothingToCut(t *testing.T) {
	for _, grace := range []string{"0", "off", "-1"} {
		t.Run("grace="+grace, func(t *testing.T) {
			c := startChild(t, "-addr", "127.0.0.1:0", "-shutdown-timeout", grace)
			want := map[string]string{"0": "10s", "off": "off", "-1": "off"}[grace]
			assert.Equal(t, want, c.started["shutdown_timeout"])
			require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
			select {
			case <-c.exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("echo did not exit:\n%s", c.log())
			}
			assert.Equal(t, 0, c.status, c.log())
			assert.Empty(t, c.linesOf("echo: shutdown deadline passed; cut the connections left"))
		})
	}
}
