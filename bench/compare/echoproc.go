package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// This file runs netwheel as its users get it: the cmd/echo binary with
// its default settings, in a process of its own.

// echoServingAddr matches cmd/echo's log line that says where it serves
// (the text handler's "addr=HOST:PORT" of msg="echo: serving").
var echoServingAddr = regexp.MustCompile(`\baddr="?([^\s"]+)`)

// echoAddr returns the listening address if line is cmd/echo's "serving"
// log line.
func echoAddr(line string) (string, bool) {
	if !strings.Contains(line, "echo: serving") {
		return "", false
	}
	m := echoServingAddr.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// echoArgs are the only flags compare gives cmd/echo: a loopback address
// with a port of the system's choice, the raw protocol, and the idle
// timeout of the phase. Everything else is the binary's default.
func echoArgs(idle time.Duration) []string {
	return []string{"-addr", "127.0.0.1:0", "-proto", "raw", "-idle-timeout", idle.String()}
}

// startEcho starts the cmd/echo binary bin with echoArgs(idle) and extra,
// and returns once it serves. Its log (stderr) is read for the address and
// otherwise dropped, but for the last lines, which an error quotes.
func startEcho(ctx context.Context, bin string, idle time.Duration, extra ...string) (*serverProc, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("compare: cmd/echo binary: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, append(echoArgs(idle), extra...)...)
	setParentDeathSignal(cmd)
	w := newLineWatch(echoAddr)
	cmd.Stderr = w
	p, err := startProc(cmd, w)
	if err != nil {
		return nil, fmt.Errorf("cmd/echo: %w", err)
	}
	return p, nil
}
