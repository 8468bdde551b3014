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
			ms := leakMetrics(defaultMetricsNamespace)
			got := compareMetrics(ms, tt.before, tt.after)
			require.Len(t, got, len(ms))
			var leak, missing []string
			for i, m := range got {
				assert.Equal(t, ms[i].name, m.Name, "report order")
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
	assert.Less(t, r.Remote.Settled, metricsSettle)
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
	assert.Equal(t, report.CloseDelayMetric, closeDelayMetric(defaultMetricsNamespace))
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

func TestCloseDelayDiff(t *testing.T) {
	expo := func(counts ...int) string { // buckets 1ms, 5ms, +Inf; sum 0.5 per observation
		n := counts[len(counts)-1]
		return fmt.Sprintf("netwheel_connections_open 0\n"+
			"netwheel_timeout_close_delay_seconds_bucket{le=\"0.001\"} %d\nnetwheel_timeout_close_delay_seconds_bucket{le=\"0.005\"} %d\n"+
			"netwheel_timeout_close_delay_seconds_bucket{le=\"+Inf\"} %d\nnetwheel_timeout_close_delay_seconds_sum %g\n"+
			"netwheel_timeout_close_delay_seconds_count %d\n", counts[0], counts[1], n, 0.5*float64(n), n)
	}
	read := func(t *testing.T, body string) reading {
		r, err := parseReading([]byte(body), defaultMetricsNamespace)
		require.NoError(t, err, "the leak metrics read whatever the histogram")
		assert.Equal(t, map[string]float64{"netwheel_connections_open": 0}, r.values)
		return r
	}
	tests := []struct {
		name          string
		before, after string
		want          *report.ServerHistogram
		wantNote      string // "" : none
	}{
		{name: "after minus before, bucket-wise", before: expo(3, 5, 6), after: expo(10, 15, 20),
			want: &report.ServerHistogram{Metric: report.CloseDelayMetric, Bounds: []float64{0.001, 0.005}, Counts: []uint64{7, 10}, Count: 14, Sum: 7}},
		{name: "no close in between", before: expo(3, 5, 6), after: expo(3, 5, 6),
			want: &report.ServerHistogram{Metric: report.CloseDelayMetric, Bounds: []float64{0.001, 0.005}, Counts: []uint64{0, 0}, Count: 0, Sum: 0}},
		{name: "not exported: nothing said", before: "netwheel_connections_open 0\n", after: "netwheel_connections_open 0\n"},
		{name: "server restarted", before: expo(3, 5, 6), after: expo(1, 1, 1), wantNote: "fell from 6 to 1 (did the server restart?)"},
		{name: "only after", before: "netwheel_connections_open 0\n", after: expo(1, 1, 1), wantNote: "only one of the readings"},
		{name: "malformed after", before: expo(3, 5, 6), after: "netwheel_connections_open 0\nnetwheel_timeout_close_delay_seconds_bucket{le=\"x\"} 1\n",
			wantNote: `le "x" is not a number`},
		{name: "no +Inf before", before: "netwheel_connections_open 0\nnetwheel_timeout_close_delay_seconds_bucket{le=\"1\"} 1\nnetwheel_timeout_close_delay_seconds_sum 1\nnetwheel_timeout_close_delay_seconds_count 1\n",
			after: expo(1, 1, 1), wantNote: "no +Inf bucket"},
		{name: "fractional count", before: expo(3, 5, 6), after: strings.Replace(expo(3, 5, 6), "} 3\n", "} 3.5\n", 1), wantNote: "not a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := closeDelayDiff(report.CloseDelayMetric, read(t, tt.before), read(t, tt.after))
			if tt.wantNote != "" {
				assert.Nil(t, got)
				assert.Contains(t, note, "server's own close delay (netwheel_timeout_close_delay_seconds) not reported: ")
				assert.Contains(t, note, tt.wantNote)
				return
			}
			assert.Empty(t, note)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestHandlerCloseDelay(t *testing.T) {
	h, err := handlerCloseDelay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Contains(t, r.Header.Get("Accept"), "text/plain", "asks for the text format")
		fmt.Fprint(w, "netwheel_timeout_close_delay_seconds_bucket{le=\"0.001\"} 2\nnetwheel_timeout_close_delay_seconds_bucket{le=\"+Inf\"} 3\n"+
			"netwheel_timeout_close_delay_seconds_sum 0.25\nnetwheel_timeout_close_delay_seconds_count 3\n")
	}))
	require.NoError(t, err)
	assert.Equal(t, &report.ServerHistogram{Metric: report.CloseDelayMetric, Bounds: []float64{0.001}, Counts: []uint64{2}, Count: 3, Sum: 0.25}, h)

	h, err = handlerCloseDelay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other 1\n") }))
	assert.NoError(t, err)
	assert.Nil(t, h, "not exported")
	_, err = handlerCloseDelay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other{a=\"b\" 1\n") }))
	assert.ErrorContains(t, err, "line 1", "a malformed exposition is an error, with its line")
	_, err = handlerCloseDelay(http.NotFoundHandler())
	assert.ErrorContains(t, err, "404")
}
