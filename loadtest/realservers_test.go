package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// The harness's judgement of servers users run, installed from Debian
// (.ci/run installs them where they are missing): Redis with `timeout 2`
// closes idle clients in a periodic sweep, late by a second or more at
// the median; HAProxy in mode tcp with `timeout client 2s`, in front of an
// echo server, closes them on time. Each runs the idle scenario with a
// modest number of connections.

// realConns is how many idle connections each real server gets.
const realConns = 150

// TestRealServers_Redis: every connection is driven (PING answered by
// +PONG, the idle timer then left to run) and Redis is judged late by at
// least half a second at the median.
func TestRealServers_Redis(t *testing.T) {
	bin := findBinary(t, "redis-server")
	port := freePort(t)
	dir := t.TempDir()
	startProcess(t, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--timeout", "2",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--maxclients", "1000", "--loglevel", "warning")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitAnswer(t, addr, "PING\r\n", "+PONG\r\n")

	res, out, err := runIdle(t, addr, "-preset", "redis")
	s := res.Scenario("idle")
	require.NotNil(t, s, out)
	assert.Equal(t, realConns, s.Opened, "every connection opened\n%s", out)
	assert.Empty(t, s.Errors, "no connection failed before its idle time began (no_echo: the answer was not read)\n%s", out)
	assert.Zero(t, s.Lost, out)
	assert.Equal(t, realConns, s.Closes.Expected, "every connection was driven to its idle timeout\n%s", out)
	assert.GreaterOrEqual(t, time.Duration(s.Closes.FromStart.Quantile(0.5)), 500*time.Millisecond,
		"Redis closes idle clients in a periodic sweep: late by at least 0.5 s at the median\n%s", out)
	assert.True(t, errors.Is(err, errJudged), "Redis's late closes fail the judgement: %v\n%s", err, out)
	assert.Contains(t, strings.ToLower(strings.Join(verdict(s), "\n")), "late", "the verdict says the closes were late\n%s", out)
}

// TestRealServers_HAProxy: HAProxy closes on time; the run is judged ok,
// and so it is when its backend answers 800 ms late: HAProxy's client
// timeout runs from the answer it passes on, the end of the window in
// which it last saw activity, which the verdict measures lateness from.
func TestRealServers_HAProxy(t *testing.T) {
	bin := findBinary(t, "haproxy")
	for _, tt := range []struct {
		name  string
		delay time.Duration
	}{
		{name: "prompt backend"},
		{name: "backend answering 800 ms late", delay: 800 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := startHAProxy(t, bin, startEchoBackend(t, tt.delay), "")
			// HAProxy's clock counts whole milliseconds: a close may come up
			// to one early, which a tick of 1 ms would call early.
			res, out, err := runIdle(t, addr, "-tick", "2ms")
			require.NoError(t, err, "HAProxy closes on time: judged ok\n%s", out)
			s := res.Scenario("idle")
			require.NotNil(t, s, out)
			assert.Equal(t, realConns, s.Opened, out)
			assert.Equal(t, realConns, s.Closes.Expected, out)
			assert.Equal(t, realConns, s.Closes.OnTime, "closed on time\n%s", out)
			assert.Empty(t, verdict(s), out)
			if tt.delay > 0 {
				assert.GreaterOrEqual(t, time.Duration(s.Closes.Window.Quantile(0.5)), tt.delay, "the answers came late\n%s", out)
				assert.GreaterOrEqual(t, time.Duration(s.Closes.FromStart.Quantile(0.5)), tt.delay, "late from the send, on time from the answer\n%s", out)
			}
		})
	}
}

// startHAProxy starts HAProxy in mode tcp with `timeout client 2s` in front
// of backend, whose server line ends with serverOpts (as "send-proxy-v2"),
// and returns its address once it answers.
func startHAProxy(t *testing.T, bin, backend, serverOpts string) string {
	t.Helper()
	port := freePort(t)
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`global
	maxconn 2000
defaults
	mode tcp
	timeout connect 2s
	timeout client 2s
	timeout server 60s
frontend fe
	bind 127.0.0.1:%d
	default_backend be
backend be
	server echo %s %s
`, port, backend, serverOpts)), 0o600))
	startProcess(t, bin, "-db", "-q", "-f", cfg)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitAnswer(t, addr, "hello\n", "hello\n")
	return addr
}

// runIdle runs the idle scenario (idle 2s) against addr with extra flags,
// and returns the result read back from its JSON, the text report and
// realMain's error.
func runIdle(t *testing.T, addr string, extra ...string) (*report.Result, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "result.json")
	args := append([]string{"-addr", addr, "-scenario", "idle", "-idle", "2s", "-conns", strconv.Itoa(realConns), "-q", "-json", path}, extra...)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := realMain(ctx, args, &out, io.Discard)
	if err != nil && !errors.Is(err, errJudged) {
		require.NoError(t, err, out.String())
	}
	f, ferr := os.Open(path)
	require.NoError(t, ferr, out.String())
	defer f.Close()
	res, rerr := report.ReadJSON(f)
	require.NoError(t, rerr)
	return res, out.String(), err
}

// findBinary returns name's path in PATH or /usr/sbin (where Debian puts
// haproxy), or skips the test: the binary is not installed here.
func findBinary(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Skipf("%s is not installed (not in PATH nor /usr/sbin); .ci/run installs it with apt-get (Debian package %s)", name, debianPackage[name])
	return ""
}

var debianPackage = map[string]string{"redis-server": "redis-server", "haproxy": "haproxy"}

// freePort returns a port on 127.0.0.1 that was free a moment ago, for a
// server process that binds it later. It is taken below Linux's ephemeral
// range (32768 and up), where the kernel picks the local ports of
// outgoing connections: a port from there can be taken meanwhile by one of
// the thousands of connections the tests open, as an echo metrics
// listener's once was ("address already in use").
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			require.NoError(t, ln.Close())
			return port
		}
	}
	t.Fatal("no free port in 20000-31999 after 100 tries")
	return 0
}

// startProcess starts a server process, its output kept for the failure
// message; the test's cleanup kills it and waits.
func startProcess(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s said:\n%s", filepath.Base(bin), out.String())
		}
	})
}

// waitAnswer waits (at most 10 s) until the server at addr answers msg
// with want.
func waitAnswer(t *testing.T, addr, msg, want string) {
	t.Helper()
	var last error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			last = err
			continue
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, len(want))
		_, err = c.Write([]byte(msg))
		if err == nil {
			_, err = io.ReadFull(c, buf)
		}
		c.Close()
		if err == nil && string(buf) == want {
			return
		}
		last = fmt.Errorf("answered %q, %v", buf, err)
	}
	t.Fatalf("the server at %s is not answering: %v", addr, last)
}

// startEchoBackend starts an echo server on 127.0.0.1 for HAProxy's
// backend that answers each read delay after it came; the test's cleanup
// closes it and its connections and waits for them.
func startEchoBackend(t *testing.T, delay time.Duration) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn, _ uint64) {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			time.Sleep(delay)
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	})
}
