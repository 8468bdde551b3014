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
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver"
)

func TestMetricsTarget(t *testing.T) {
	tests := []struct {
		name, raw, addr string
		want            string // "" : an error
	}{
		{name: "url", raw: "http://127.0.0.1:9100/metrics", addr: "127.0.0.1:9000", want: "http://127.0.0.1:9100/metrics"},
		{name: "bare host:port as cmd/echo takes it", raw: "127.0.0.1:9100", addr: "127.0.0.1:9000", want: "http://127.0.0.1:9100/metrics"},
		{name: "url without path", raw: "http://localhost:9100", addr: "127.0.0.1:9000", want: "http://localhost:9100/metrics"},
		{name: "other path kept", raw: "http://[::1]:9100/stats/prom", addr: "127.0.0.1:9000", want: "http://[::1]:9100/stats/prom"},
		{name: "-addr's host, not loopback", raw: "http://10.1.2.3:9100/metrics", addr: "10.1.2.3:9000", want: "http://10.1.2.3:9100/metrics"},
		{name: "another host", raw: "http://10.1.2.4:9100/metrics", addr: "10.1.2.3:9000"},
		{name: "loopback metrics, remote -addr: same machine as the harness, allowed", raw: "127.0.0.1:9100", addr: "10.1.2.3:9000", want: "http://127.0.0.1:9100/metrics"},
		{name: "https", raw: "https://127.0.0.1:9100/metrics", addr: "127.0.0.1:9000"},
		{name: "credentials", raw: "http://u:p@127.0.0.1:9100/metrics", addr: "127.0.0.1:9000"},
		{name: "no host", raw: "http:///metrics", addr: "127.0.0.1:9000"},
		{name: "empty", raw: "", addr: "127.0.0.1:9000"},
		{name: "without -addr", raw: "127.0.0.1:9100", addr: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricsTarget(tt.raw, tt.addr)
			if tt.want == "" {
				assert.ErrorIs(t, err, errUsage)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := parseFlags([]string{"-metrics", "127.0.0.1:9100"}, io.Discard)
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, err.Error(), "needs -addr")
	o, err := parseFlags([]string{"-addr", "127.0.0.1:9000", "-metrics", "127.0.0.1:9100"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9100/metrics", o.metrics)
}

func TestCompareMetrics(t *testing.T) {
	idleServer := map[string]float64{"netwheel_connections_open": 0, "netwheel_timers_pending": 0, "process_open_fds": 18, "go_goroutines": 17}
	with := func(name string, v float64) map[string]float64 {
		m := map[string]float64{}
		for k, x := range idleServer {
			m[k] = x
		}
		m[name] = v
		return m
	}
	without := func(name string) map[string]float64 {
		m := with(name, 0)
		delete(m, name)
		return m
	}
	tests := []struct {
		name          string
		before, after map[string]float64
		wantLeak      []string // metric names flagged
		wantMissing   []string
	}{
		{name: "no leak", before: idleServer, after: idleServer},
		{name: "connection leak", before: idleServer, after: with("netwheel_connections_open", 1), wantLeak: []string{"netwheel_connections_open"}},
		{name: "timer leak", before: idleServer, after: with("netwheel_timers_pending", 3), wantLeak: []string{"netwheel_timers_pending"}},
		{name: "fewer connections than before is no leak", before: with("netwheel_connections_open", 5), after: idleServer},
		{name: "fd growth within tolerance", before: idleServer, after: with("process_open_fds", 18+fdTolerance)},
		{name: "fd growth over tolerance", before: idleServer, after: with("process_open_fds", 18+fdTolerance+1), wantLeak: []string{"process_open_fds"}},
		{name: "goroutine growth within tolerance", before: idleServer, after: with("go_goroutines", 17+goroutineTolerance)},
		{name: "goroutine growth over tolerance", before: idleServer, after: with("go_goroutines", 17+goroutineTolerance+1), wantLeak: []string{"go_goroutines"}},
		{name: "metric missing after", before: idleServer, after: without("netwheel_timers_pending"), wantMissing: []string{"netwheel_timers_pending"}},
		{name: "metric missing before, leak elsewhere still seen", before: without("go_goroutines"), after: with("netwheel_connections_open", 2),
			wantLeak: []string{"netwheel_connections_open"}, wantMissing: []string{"go_goroutines"}},
		{name: "not a netwheel server", before: map[string]float64{"process_open_fds": 9, "go_goroutines": 4}, after: map[string]float64{"process_open_fds": 9, "go_goroutines": 4},
			wantMissing: []string{"netwheel_connections_open", "netwheel_timers_pending"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compareMetrics(tt.before, tt.after)
			require.Len(t, got, len(leakMetrics))
			var leak, missing []string
			for i, m := range got {
				assert.Equal(t, leakMetrics[i].name, m.Name, "report order")
				if m.Leak {
					leak = append(leak, m.Name)
				}
				if m.Missing {
					missing = append(missing, m.Name)
					continue
				}
				assert.Equal(t, tt.before[m.Name], m.Before, m.Name)
				assert.Equal(t, tt.after[m.Name], m.After, m.Name)
			}
			assert.Equal(t, tt.wantLeak, leak, "leaks")
			assert.Equal(t, tt.wantMissing, missing, "missing")
		})
	}
}

// startTestNetserver starts a framed netwheel echo server with an idle
// timeout (0: none) on 127.0.0.1, and its /metrics on an httptest server
// (also on 127.0.0.1); both stop at the end of the test.
func startTestNetserver(t *testing.T, idleTimeout time.Duration) (addr, metricsURL string) {
	t.Helper()
	srv, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed, Tick: time.Millisecond,
		SilentShutdown: true, Timeouts: idle.Config{IdleTimeout: idleTimeout}}, netserver.Echo{})
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
	checkReaped(t, r.Scenario("idle"), 250*time.Millisecond)
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
	assert.Less(t, r.Remote.Settled, metricsSettle)
	for _, l := range r.Limits {
		assert.NotContains(t, l, "LEAK", "limit lines")
	}
	assert.Contains(t, out, "server metrics ("+murl+"), read ")
	assert.Contains(t, out, ": no leak")
	assert.NotContains(t, out, "leak check: not done")
	assert.Contains(t, out, "all 2 scenarios ok")

	_, out = e2e(t, "-addr", addr, "-proto", "framed", "-scenario", "echo", "-conns", "4", "-duration", "200ms")
	assert.Contains(t, out, "leak check: not done; give -metrics", "external runs without -metrics say so")
}

// TestEndToEnd_ExternalMetricsLeak drives a real server but reads a fake
// endpoint whose connection count stays up after the first reading and
// which has no goroutine figure.
func TestEndToEnd_ExternalMetricsLeak(t *testing.T) {
	defer func(d time.Duration) { metricsSettle = d }(metricsSettle)
	metricsSettle = 400 * time.Millisecond
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
	assert.Contains(t, strings.Join(r.Limits, "\n"), "LEAK? the server ("+hs.URL+"/metrics) still has connections open 0 -> 3")
	assert.Contains(t, out, " !connections open   0 -> 3")
	assert.Contains(t, out, "go_goroutines not exposed")
	assert.Contains(t, out, "the run opened 4 connections, within the fd and goroutine tolerances")
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
	defer func(d time.Duration) { metricsSettle = d }(metricsSettle)
	metricsSettle = 300 * time.Millisecond
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
