package observe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/report"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Target(tt.raw, tt.addr)
			if tt.want == "" {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
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
			ms := leakMetrics(DefaultNamespace)
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

func TestCloseDelayDiff(t *testing.T) {
	expo := func(counts ...int) string { // buckets 1ms, 5ms, +Inf; sum 0.5 per observation
		n := counts[len(counts)-1]
		return fmt.Sprintf("netwheel_connections_open 0\n"+
			"netwheel_timeout_close_delay_seconds_bucket{le=\"0.001\"} %d\nnetwheel_timeout_close_delay_seconds_bucket{le=\"0.005\"} %d\n"+
			"netwheel_timeout_close_delay_seconds_bucket{le=\"+Inf\"} %d\nnetwheel_timeout_close_delay_seconds_sum %g\n"+
			"netwheel_timeout_close_delay_seconds_count %d\n", counts[0], counts[1], n, 0.5*float64(n), n)
	}
	read := func(t *testing.T, body string) reading {
		r, err := parseReading([]byte(body), DefaultNamespace)
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
			want: &report.ServerHistogram{Metric: CloseDelayMetric(DefaultNamespace), Bounds: []float64{0.001, 0.005}, Counts: []uint64{7, 10}, Count: 14, Sum: 7}},
		{name: "no close in between", before: expo(3, 5, 6), after: expo(3, 5, 6),
			want: &report.ServerHistogram{Metric: CloseDelayMetric(DefaultNamespace), Bounds: []float64{0.001, 0.005}, Counts: []uint64{0, 0}, Count: 0, Sum: 0}},
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
			got, note := closeDelayDiff(CloseDelayMetric(DefaultNamespace), read(t, tt.before), read(t, tt.after))
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
	h, err := HandlerCloseDelay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Contains(t, r.Header.Get("Accept"), "text/plain", "asks for the text format")
		fmt.Fprint(w, "netwheel_timeout_close_delay_seconds_bucket{le=\"0.001\"} 2\nnetwheel_timeout_close_delay_seconds_bucket{le=\"+Inf\"} 3\n"+
			"netwheel_timeout_close_delay_seconds_sum 0.25\nnetwheel_timeout_close_delay_seconds_count 3\n")
	}))
	require.NoError(t, err)
	assert.Equal(t, &report.ServerHistogram{Metric: CloseDelayMetric(DefaultNamespace), Bounds: []float64{0.001}, Counts: []uint64{2}, Count: 3, Sum: 0.25}, h)

	h, err = HandlerCloseDelay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other 1\n") }))
	assert.NoError(t, err)
	assert.Nil(t, h, "not exported")
	_, err = HandlerCloseDelay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other{a=\"b\" 1\n") }))
	assert.ErrorContains(t, err, "line 1", "a malformed exposition is an error, with its line")
	_, err = HandlerCloseDelay(http.NotFoundHandler())
	assert.ErrorContains(t, err, "404")
}

func TestMemSampler(t *testing.T) {
	var rss atomic.Int64
	rss.Store(100 << 20)
	reads := make(chan struct{}, 1000)
	read := func(context.Context) (int64, error) {
		v := rss.Load()
		select {
		case reads <- struct{}{}:
		default:
		}
		return v, nil
	}
	m := &report.Memory{Bound: report.MemoryBound{Fixed: 10 << 20}}
	s := startSampler(context.Background(), read, m, time.Millisecond)
	rss.Store(105 << 20)
	for len(reads) > 0 {
		<-reads
	}
	for range 3 { // three samples since the store: the bound is not passed
		select {
		case <-reads:
		case <-time.After(5 * time.Second):
			t.Fatal("the sampler took no samples")
		}
	}
	select {
	case <-s.exceeded:
		t.Fatal("exceeded within the bound")
	default:
	}
	rss.Store(111 << 20)
	select {
	case <-s.exceeded:
	case <-time.After(5 * time.Second):
		t.Fatal("the growth passed the bound and nobody was told")
	}
	rss.Store(90 << 20)
	got := s.Stop()
	assert.Equal(t, int64(100<<20), got.Before)
	assert.Equal(t, int64(111<<20), got.Peak)
	assert.Equal(t, int64(90<<20), got.End, "stop takes a last reading")
	assert.True(t, got.Stopped)
	assert.Len(t, (&report.Result{Memory: got}).Judge().Memory, 1)

	failing := func(context.Context) (int64, error) { return 0, errors.New("gone") }
	m = &report.Memory{}
	got = startSampler(context.Background(), failing, m, time.Millisecond).Stop()
	assert.Contains(t, got.Err, "could not be read: gone")
	assert.Empty(t, (&report.Result{Memory: got}).Judge().Memory, "nothing to judge")

	got = StartMemory(context.Background(), Source{Metrics: ""}, report.MemoryBound{}).Stop()
	assert.Contains(t, got.Err, "-server-pid")
}
