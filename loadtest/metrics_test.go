package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/loadtest/internal/observe"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver"
)

// startTestNetserver starts a framed netwheel echo server with an idle
// timeout (0: none) on 127.0.0.1, and its /metrics on an httptest server
// (also on 127.0.0.1); both stop at the end of the test.
func startTestNetserver(t *testing.T, idleTimeout time.Duration) (addr, metricsURL string) {
	t.Helper()
	return startTestNetserverNS(t, idleTimeout, "")
}

// startTestNetserverNS is startTestNetserver with the server's metrics
// prefixed ns ("": netwheel).
func startTestNetserverNS(t *testing.T, idleTimeout time.Duration, ns string) (addr, metricsURL string) {
	t.Helper()
	srv, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed, Tick: time.Millisecond,
		SilentShutdown: true, Timeouts: idle.Config{IdleTimeout: idleTimeout}, MetricsNamespace: ns}, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	hs := httptest.NewServer(srv.MetricsHandler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
	})
	return srv.Addr().String(), hs.URL + "/metrics"
}

func TestEndToEnd_ExternalMetricsNoLeak(t *testing.T) {
	addr, murl := startTestNetserver(t, 300*time.Millisecond)
	r, out := e2e(t, "-addr", addr, "-metrics", murl, "-proto", "framed", "-scenario", "echo,idle",
		"-conns", "20", "-duration", "500ms", "-idle", "300ms", "-slack", "250ms")
	checkReaped(t, r, "idle", 250*time.Millisecond, 250*time.Millisecond)
	require.NotNil(t, r.Remote, out)
	assert.Equal(t, murl, r.Remote.URL)
	assert.Empty(t, r.Remote.Err)
	require.Len(t, r.Remote.Metrics, 4)
	for _, m := range r.Remote.Metrics {
		assert.False(t, m.Missing, "netserver exposes %s", m.Name)
		assert.False(t, m.Leak, "%s %v -> %v", m.Name, m.Before, m.After)
	}
	assert.Zero(t, r.Remote.Metrics[0].After, "connections open at the end")
	assert.Positive(t, r.Remote.Metrics[2].Before, "open fds read from the process collector")
	assert.Positive(t, r.Remote.Metrics[3].Before, "goroutines read from the Go collector")
	assert.Less(t, r.Remote.Settled, observe.SettleWait)
	for _, l := range r.Limits {
		assert.NotContains(t, l, "LEAK", "limit lines")
	}
	assert.Contains(t, out, "server metrics ("+murl+"), read ")
	assert.Contains(t, out, ": no leak")
	assert.NotContains(t, out, "leak check: not done")
	assert.Contains(t, out, "all 2 scenarios judged are ok")
	require.NotNil(t, r.CloseDelay, "read from the same endpoint")
	assert.Equal(t, uint64(r.Scenario("idle").Closes.OnTime), r.CloseDelay.Count, "this run's idle reaps")
	assert.Contains(t, out, "server's own close delay (from its deadline to its close call, netwheel_timeout_close_delay_seconds): 20 timeout closes, p50 <= ")

	_, out = e2e(t, "-addr", addr, "-proto", "framed", "-scenario", "echo", "-conns", "4", "-duration", "200ms")
	assert.Contains(t, out, "leak check: not done; give -metrics", "external runs without -metrics say so")
}

// A server started with Config.MetricsNamespace: with -metrics-namespace
// the leak check and the close delay read its metrics; without, its own
// gauges are missing and its close delay unseen.
func TestEndToEnd_ExternalMetricsNamespace(t *testing.T) {
	addr, murl := startTestNetserverNS(t, 300*time.Millisecond, "edge")
	args := []string{"-addr", addr, "-metrics", murl, "-proto", "framed", "-scenario", "idle",
		"-conns", "10", "-duration", "200ms", "-idle", "300ms", "-slack", "250ms"}
	r, out := e2e(t, append(args, "-metrics-namespace", "edge")...)
	require.NotNil(t, r.Remote, out)
	require.Len(t, r.Remote.Metrics, 4)
	assert.Equal(t, "edge_connections_open", r.Remote.Metrics[0].Name)
	assert.Equal(t, "edge_timers_pending", r.Remote.Metrics[1].Name)
	for _, m := range r.Remote.Metrics {
		assert.False(t, m.Missing, "%s read", m.Name)
		assert.False(t, m.Leak, "%s %v -> %v", m.Name, m.Before, m.After)
	}
	require.NotNil(t, r.CloseDelay, out)
	assert.Equal(t, "edge_timeout_close_delay_seconds", r.CloseDelay.Metric)
	assert.Equal(t, uint64(r.Scenario("idle").Closes.OnTime), r.CloseDelay.Count, "this run's idle reaps")
	assert.NotContains(t, out, "not exposed")

	r, out = e2e(t, args...)
	require.NotNil(t, r.Remote)
	assert.True(t, r.Remote.Metrics[0].Missing, "netwheel_connections_open is not this server's")
	assert.Contains(t, out, "netwheel_connections_open, netwheel_timers_pending not exposed")
	assert.Nil(t, r.CloseDelay)
}

func TestParseFlags_Metrics(t *testing.T) {
	_, err := parseFlags([]string{"-metrics", "127.0.0.1:9100"}, io.Discard)
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, err.Error(), "needs -addr")
	o, err := parseFlags([]string{"-addr", "127.0.0.1:9000", "-metrics", "127.0.0.1:9100"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9100/metrics", o.metrics)
}

func TestParseFlags_MetricsNamespace(t *testing.T) {
	o, err := parseFlags([]string{"-addr", "127.0.0.1:9000", "-metrics", "127.0.0.1:9100"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "netwheel", o.metricsNS, "netserver's default")
	o, err = parseFlags([]string{"-addr", "127.0.0.1:9000", "-metrics", "127.0.0.1:9100", "-metrics-namespace", "edge_1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "edge_1", o.metricsNS)
	for _, args := range [][]string{
		{"-addr", "127.0.0.1:9000", "-metrics", "127.0.0.1:9100", "-metrics-namespace", "1edge"},
		{"-addr", "127.0.0.1:9000", "-metrics", "127.0.0.1:9100", "-metrics-namespace", ""},
		{"-addr", "127.0.0.1:9000", "-metrics-namespace", "edge"},
	} {
		_, err := parseFlags(args, io.Discard)
		assert.ErrorIs(t, err, errUsage, "%v", args)
	}
	assert.Equal(t, "netwheel_timeout_close_delay_seconds", observe.CloseDelayMetric(observe.DefaultNamespace))
}

// TestEndToEnd_ExternalMetricsLeak drives a real server but reads a fake
// endpoint whose connection count stays up after the first reading and
// which has no goroutine figure.
func TestEndToEnd_ExternalMetricsLeak(t *testing.T) {
	defer func(d time.Duration) { observe.SettleWait = d }(observe.SettleWait)
	observe.SettleWait = 400 * time.Millisecond
	addr, _ := startTestNetserver(t, 0)
	var reads atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open := 0
		if reads.Add(1) > 1 {
			open = 3
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprintf(w, "# TYPE netwheel_connections_open gauge\nnetwheel_connections_open %d\nnetwheel_timers_pending{wheel=\"0\"} 0\nprocess_open_fds 20\n", open)
	}))
	defer hs.Close()
	r, out := e2e(t, "-addr", addr, "-metrics", hs.URL, "-scenario", "echo", "-conns", "4", "-duration", "200ms")
	require.NotNil(t, r.Remote)
	leaks := r.Remote.Leaks()
	require.Len(t, leaks, 1, out)
	assert.Equal(t, report.RemoteMetric{Name: "netwheel_connections_open", Label: "connections open", Before: 0, After: 3, Leak: true}, leaks[0])
	assert.GreaterOrEqual(t, reads.Load(), int64(3), "polled while waiting for the server to settle")
	assert.GreaterOrEqual(t, r.Remote.Settled, 300*time.Millisecond, "waited for the server before calling it a leak")
	assert.True(t, r.Remote.Metrics[3].Missing, "no go_goroutines")
	assert.Contains(t, strings.Join(r.Leaks, "\n"), "the server ("+hs.URL+"/metrics) still has connections open 0 -> 3")
	assert.Contains(t, out, " !connections open   0 -> 3")
	assert.Contains(t, out, "go_goroutines not exposed")
	assert.Contains(t, out, "the run opened 4 connections, within the fd and goroutine tolerances")
	assert.Nil(t, r.CloseDelay, "the endpoint has no close delay")
	assert.NotContains(t, out, "close delay", "and nothing is said about it")
}

func TestEndToEnd_ExternalMetricsUnreadable(t *testing.T) {
	addr, _ := startTestNetserver(t, 0)
	hs := httptest.NewServer(http.NotFoundHandler())
	defer hs.Close()
	err := realMain(t.Context(), []string{"-addr", addr, "-metrics", hs.URL, "-scenario", "echo", "-conns", "1", "-duration", "100ms", "-q"}, io.Discard, io.Discard)
	require.Error(t, err, "an endpoint that cannot be read stops the run before it starts")
	assert.Contains(t, err.Error(), "404")

	proto := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.google.protobuf")
	}))
	defer proto.Close()
	err = realMain(t.Context(), []string{"-addr", addr, "-metrics", proto.URL, "-scenario", "echo", "-conns", "1", "-duration", "100ms", "-q"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "text format")
}

func TestEndToEnd_ExternalMetricsGoneAfterRun(t *testing.T) {
	defer func(d time.Duration) { observe.SettleWait = d }(observe.SettleWait)
	observe.SettleWait = 300 * time.Millisecond
	addr, _ := startTestNetserver(t, 0)
	var reads atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reads.Add(1) > 1 {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "netwheel_connections_open 0\nprocess_open_fds 20")
	}))
	defer hs.Close()
	r, out := e2e(t, "-addr", addr, "-metrics", hs.URL, "-scenario", "echo", "-conns", "2", "-duration", "100ms")
	require.NotNil(t, r.Remote)
	assert.Contains(t, r.Remote.Err, "503")
	assert.Equal(t, 20.0, r.Remote.Metrics[2].Before, "the before reading is kept")
	assert.Empty(t, r.Remote.Leaks())
	assert.Contains(t, out, "no reading after the run")
	assert.Contains(t, strings.Join(r.Limits, "\n"), "leak check: the server's metrics could not be read after the run")
}
