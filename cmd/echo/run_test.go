package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/internal/version"
)

// gnet's shared worker pool (ants) keeps goroutines for the life of the
// process once any gnet engine has run; they are not per server.
var gnetPool = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
}

func TestMain(m *testing.M) {
	if os.Getenv(asEchoEnv) != "" { // run as the echo command (see TestMain_Layout)
		main()
	}
	goleak.VerifyTestMain(m, gnetPool...)
}

// syncBuffer is a bytes.Buffer that run's logger and the test may use from
// different goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// logLine returns the first JSON log line with message msg, or nil.
func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		if m["msg"] == msg {
			return m
		}
	}
	return nil
}

// echoRun is one run of the echo command, serving until stop.
type echoRun struct {
	stderr  *syncBuffer
	started map[string]any // the startup log line
	cancel  context.CancelFunc
	exit    chan int
}

// startEcho runs the command with args plus a JSON log and returns once
// it is serving.
func startEcho(t *testing.T, args ...string) *echoRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &echoRun{stderr: &syncBuffer{}, cancel: cancel, exit: make(chan int, 1)}
	go func() {
		r.exit <- run(ctx, append(args, "-log-format", "json"), io.Discard, r.stderr)
	}()
	require.Eventually(t, func() bool {
		r.started = logLine(t, r.stderr.String(), "echo: serving")
		return r.started != nil
	}, 10*time.Second, 5*time.Millisecond, "no startup line; stderr:\n%s", r.stderr)
	return r
}

// stop cancels the run (SIGTERM) and returns its exit status.
func (r *echoRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case c := <-r.exit:
		return c
	case <-time.After(15 * time.Second):
		t.Fatalf("run did not return after cancel; stderr:\n%s", r.stderr)
		return -1
	}
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := hc.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// attr returns the startup line's attribute at a dotted path, such as
// timeouts.idle.
func attr(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		g, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = g[k]
	}
	return v
}

func TestRun_EndToEnd(t *testing.T) {
	defer goleak.VerifyNone(t, append(gnetPool, goleak.IgnoreCurrent())...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"-addr", "127.0.0.1:0", "-metrics", "127.0.0.1:0", "-pprof", "-event-loops", "2",
			"-idle-timeout", "1m", "-log-format", "json", "-shutdown-timeout", "5s"}, &stdout, &stderr)
	}()

	// The startup line carries the actual addresses.
	var started map[string]any
	require.Eventually(t, func() bool {
		started = logLine(t, stderr.String(), "echo: serving")
		return started != nil
	}, 10*time.Second, 5*time.Millisecond, "no startup line; stderr:\n%s", &stderr)
	addr, _ := started["addr"].(string)
	metricsAddr, _ := started["metrics"].(string)
	assert.NotContains(t, addr, ":0", "the log shows the actual port")
	assert.Equal(t, "raw", started["proto"])
	assert.Equal(t, float64(2), started["event_loops"])
	assert.Equal(t, "1ms", started["tick"])
	assert.Equal(t, "5s", started["shutdown_timeout"])
	assert.Equal(t, logMaxConns(2), started["max_conns"], "derived for 2 event loops")
	require.IsType(t, map[string]any{}, started["timeouts"])
	assert.Equal(t, "1m0s", started["timeouts"].(map[string]any)["idle"])
	assert.Equal(t, "10s", started["timeouts"].(map[string]any)["handshake"], "on by default")
	assert.Equal(t, "1h0m0s", started["timeouts"].(map[string]any)["max_age"], "on by default")
	assert.Equal(t, "6m0s", started["timeouts"].(map[string]any)["max_age_jitter"], "on by default")

	// Raw echo.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	msg := []byte("hello, netwheel\x00\xff")
	_, err = conn.Write(msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	assert.Equal(t, msg, got)

	// Metrics and, with -pprof, pprof on their own server.
	get := func(path string) (int, string) {
		t.Helper()
		return httpGet(t, "http://"+metricsAddr+path)
	}
	code, body := get("/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "netwheel_connections_open 1\n", "the echo connection is open")
	assert.Contains(t, body, "netwheel_connections_accepted_total 1\n")
	code, body = get("/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine")
	code, _ = get("/debug/pprof/goroutine?debug=1")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get("/")
	assert.Equal(t, http.StatusNotFound, code, "only /metrics and /debug/pprof/ are served")

	// SIGTERM, with the connection still open: it is idle, so the
	// shutdown closes it at once and exits cleanly.
	cancel()
	select {
	case c := <-exit:
		assert.Equal(t, 0, c, "stderr:\n%s", &stderr)
	case <-time.After(15 * time.Second):
		t.Fatalf("run did not return after cancel; stderr:\n%s", &stderr)
	}
	_, err = conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the server closed the connection")
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "the listener is closed")
	_, err = net.DialTimeout("tcp", metricsAddr, time.Second)
	assert.Error(t, err, "the metrics listener is closed")

	logs := stderr.String()
	assert.NotNil(t, logLine(t, logs, "echo: shutting down"))
	stopped := logLine(t, logs, "echo: stopped")
	require.NotNil(t, stopped, logs)
	assert.Equal(t, float64(0), stopped["exit"])
	assert.Empty(t, stdout.String())
}

// logMaxConns is the startup line's max_conns by default with loops event
// loops, and logOpenFiles its open_files, under this process's limit.
func logMaxConns(loops int) string {
	if n := fdlimit.MaxConns(fdlimit.OpenFiles(), loops); n > 0 {
		return fmt.Sprint(n)
	}
	return "none"
}

func logOpenFiles() string {
	if n := fdlimit.OpenFiles(); n > 0 {
		return fmt.Sprint(n)
	}
	return "unknown"
}

// TestRun_Defaults: the startup line shows the safe defaults (and what
// turning them off leaves), and /debug/pprof/ is served only with -pprof.
func TestRun_Defaults(t *testing.T) {
	defer goleak.VerifyNone(t, append(gnetPool, goleak.IgnoreCurrent())...)

	base := []string{"-addr", "127.0.0.1:0", "-metrics", "127.0.0.1:0", "-event-loops", "1"}
	tests := []struct {
		name      string
		args      []string
		wantPprof int
		want      map[string]any // startup line attributes by dotted path
	}{
		{name: "raw", wantPprof: http.StatusNotFound, want: map[string]any{
			"pprof":                    false,
			"max_conns":                logMaxConns(1),
			"open_files":               logOpenFiles(),
			"timeouts.handshake":       "10s",
			"timeouts.idle":            "5m0s",
			"timeouts.write_stall":     "30s",
			"timeouts.frame":           "off",
			"timeouts.keepalive_time":  "off",
			"timeouts.read_silence":    "off",
			"limits.output_hard":       "4194304",
			"limits.output_soft":       "1048576",
			"limits.output_soft_for":   "10s",
			"limits.unacked_bytes":     nil,
			"timeouts.keepalive_count": "off",
		}},
		{name: "framed with pprof", args: []string{"-proto", "framed", "-pprof"}, wantPprof: http.StatusOK, want: map[string]any{
			"pprof":                      true,
			"timeouts.handshake":         "10s",
			"timeouts.idle":              "5m0s",
			"timeouts.write_stall":       "30s",
			"timeouts.frame":             "30s",
			"timeouts.keepalive_time":    "30s",
			"timeouts.keepalive_timeout": "10s",
			"timeouts.keepalive_count":   "1",
			"limits.unacked_bytes":       "1048576",
		}},
		{name: "all off", args: []string{"-proto", "framed", "-handshake-timeout", "-1", "-idle-timeout", "-1", "-write-stall-timeout", "-1",
			"-frame-timeout", "-1", "-keepalive-time", "-1", "-max-conns", "-1", "-output-hard", "-1", "-output-soft-for", "-1", "-unacked-bytes", "-1"},
			wantPprof: http.StatusNotFound, want: map[string]any{
				"max_conns":                  "none",
				"timeouts.handshake":         "off",
				"timeouts.idle":              "off",
				"timeouts.write_stall":       "off",
				"timeouts.frame":             "off",
				"timeouts.keepalive_time":    "off",
				"timeouts.keepalive_timeout": "off",
				"limits.output_hard":         "off",
				"limits.output_soft":         "off",
				"limits.output_soft_for":     "off",
				"limits.unacked_bytes":       "off",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := startEcho(t, append(append([]string{}, base...), tc.args...)...)
			for path, want := range tc.want {
				assert.Equal(t, want, attr(r.started, path), path)
			}
			metricsAddr, _ := r.started["metrics"].(string)
			code, _ := httpGet(t, "http://"+metricsAddr+"/metrics")
			assert.Equal(t, http.StatusOK, code)
			code, _ = httpGet(t, "http://"+metricsAddr+"/debug/pprof/")
			assert.Equal(t, tc.wantPprof, code, "/debug/pprof/")
			assert.Equal(t, 0, r.stop(t), "stderr:\n%s", r.stderr)
		})
	}
}

func TestRun_ExitStatus(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{name: "help", args: []string{"-h"}, wantCode: 0, wantStdout: "Usage: echo [flags]"},
		{name: "version", args: []string{"-version"}, wantCode: 0, wantStdout: "echo " + version.Release},
		{name: "bad flag", args: []string{"-proto", "tcp"}, wantCode: 2,
			wantStderr: []string{`echo: invalid value "tcp" for flag -proto: want raw or framed`}},
		{name: "invalid config", args: []string{"-addr", "127.0.0.1:0", "-max-age", "1s", "-max-age-jitter", "2s"}, wantCode: 2,
			wantStderr: []string{"echo: netserver: invalid config", "MaxAgeJitter 2s, MaxAge 1s", "echo -h"}},
		{name: "invalid framed config", args: []string{"-addr", "127.0.0.1:0", "-proto", "framed", "-min-rto", "2s", "-max-rto", "1s"},
			wantCode: 2, wantStderr: []string{"MinRTO 2s exceeds MaxRTO 1s"}},
		{name: "address in use", args: []string{"-addr", busy.Addr().String()}, wantCode: 1,
			wantStderr: []string{"echo: start", busy.Addr().String()}},
		{name: "metrics address in use", args: []string{"-addr", "127.0.0.1:0", "-metrics", busy.Addr().String()}, wantCode: 1,
			wantStderr: []string{"echo: metrics listener", busy.Addr().String()}},
		{name: "pprof without metrics", args: []string{"-addr", "127.0.0.1:0", "-pprof"}, wantCode: 2,
			wantStderr: []string{"echo: -pprof needs -metrics"}},
		{name: "explicit timeout beyond max age", args: []string{"-addr", "127.0.0.1:0", "-max-age", "1m", "-idle-timeout", "5m"}, wantCode: 2,
			wantStderr: []string{"IdleTimeout 5m0s is not below the longest lifetime 1m0s"}},
		{name: "bad trusted proxy", args: []string{"-addr", "127.0.0.1:0", "-proxy-protocol", "required", "-trusted-proxies", "10.0.0.300/8"}, wantCode: 2,
			wantStderr: []string{`echo: invalid value "10.0.0.300/8" for flag -trusted-proxies: "10.0.0.300/8" is not a prefix`}},
		{name: "proxy required without trusted proxies", args: []string{"-addr", "127.0.0.1:0", "-proxy-protocol", "required"}, wantCode: 2,
			wantStderr: []string{"echo: netserver: invalid config", "needs TrustedProxies"}},
		{name: "bad address", args: []string{"-addr", "nonsense"}, wantCode: 2, wantStderr: []string{"echo: netserver: invalid config", "nonsense"}},
		{name: "port out of range", args: []string{"-addr", "127.0.0.1:99999"}, wantCode: 2,
			wantStderr: []string{"echo: netserver: invalid config", "99999"}},
		{name: "duration out of range", args: []string{"-idle-timeout", "9999999h"}, wantCode: 2, wantStderr: []string{"out of range"}},
		{name: "max conns above the open-file limit", args: []string{"-max-conns", "1000000000"}, wantCode: 2,
			wantStderr: []string{"echo: netserver: invalid config: MaxConns 1000000000 is above the open-file limit"}},
		{name: "event loops beyond 4 per core", args: []string{"-event-loops", "100000"}, wantCode: 2,
			wantStderr: []string{"echo: netserver: invalid config: EventLoops 100000 is beyond 4 per core"}},
		{name: "bad metrics address", args: []string{"-metrics", "bad"}, wantCode: 2, wantStderr: []string{`echo: -metrics "bad"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.wantCode, code)
			if tc.wantStdout != "" {
				assert.Contains(t, stdout.String(), tc.wantStdout)
			} else {
				assert.Empty(t, stdout.String())
			}
			for _, w := range tc.wantStderr {
				assert.Contains(t, stderr.String(), w)
			}
		})
	}
}
