// Package observe reads a server under test from outside the harness's
// connections: the leak check of -addr runs (its Prometheus endpoint read
// before and after the run) and its resident memory while hostile
// scenarios run; and the harness's own process over the run (Process).
package observe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/promsample"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver"
)

// Tolerances of the leak check. Connections and timers are exact counts
// the server keeps: once every client has closed they must be back to
// their value before the run. Open files and goroutines also move for
// reasons that are not leaks (each scrape's HTTP connection, lazy starts
// in the runtime and libraries); a leak of one per connection grows them
// by about the connections the run opened, far beyond these.
const (
	fdTolerance        = 4
	goroutineTolerance = 10
)

// leakMetric is one metric the leak check reads, and the growth over the
// run it tolerates.
type leakMetric struct {
	name, label string
	tolerance   float64
}

// DefaultNamespace is the prefix of netserver's own metrics unless
// its Config.MetricsNamespace says otherwise (-metrics-namespace).
const DefaultNamespace = netserver.DefaultMetricsNamespace

// leakMetrics returns the metrics checked, in report order, for a server
// whose own metrics are prefixed ns; netserver exposes all four (the last
// two through client_golang's Go and process collectors, which no
// namespace prefixes).
func leakMetrics(ns string) []leakMetric {
	return []leakMetric{
		{name: ns + "_connections_open", label: "connections open"},
		{name: ns + "_timers_pending", label: "timers pending"},
		{name: "process_open_fds", label: "open fds", tolerance: fdTolerance},
		{name: "go_goroutines", label: "goroutines", tolerance: goroutineTolerance},
	}
}

// metricName matches a Prometheus metric name (without colons), as a
// namespace must be.
var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ValidNamespace reports whether ns can prefix a Prometheus metric name.
func ValidNamespace(ns string) bool { return metricName.MatchString(ns) }

// CloseDelayMetric is the name of the histogram netserver keeps of how
// late, on its own clock, its event loops closed connections whose
// timeout had expired, for a server whose own metrics are prefixed ns.
func CloseDelayMetric(ns string) string { return ns + "_timeout_close_delay_seconds" }

// Bounds of the leak check's reads: each request, and the pause between
// readings.
var (
	metricsFetchTimeout = 2 * time.Second
	metricsPoll         = 100 * time.Millisecond
)

// SettleWait bounds the wait for the server to settle after the run
// (longer than embedded mode's 2 s, since the server may be on another
// host and every reading is an HTTP round trip). Set it before
// StartLeakCheck, as tests do; it is not guarded.
var SettleWait = 5 * time.Second

const metricsMaxBody = 16 << 20

// Target validates -metrics and returns the URL to read. It takes an
// http URL (http://HOST:PORT/metrics) or, like cmd/echo's own -metrics
// flag, a bare HOST:PORT, which means http://HOST:PORT/metrics; an empty
// path also means /metrics. The host must be a loopback one, or addr's
// host: the harness talks to no other machine than the one it tests.
func Target(raw, addr string) (string, error) {
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("-metrics %q: want http://HOST:PORT/PATH or HOST:PORT", raw)
	}
	if u.Path == "" {
		u.Path = "/metrics"
	}
	addrHost, _, _ := net.SplitHostPort(addr)
	if h := u.Hostname(); !report.LoopbackHost(h) && !strings.EqualFold(h, addrHost) {
		return "", fmt.Errorf("-metrics %q: the host must be loopback or -addr's (%s)", raw, addrHost)
	}
	return u.String(), nil
}

// compareMetrics sets each of the leak metrics ms's before and after
// figures side by side and flags growth beyond its tolerance. A metric
// absent (or not a number) in either reading is marked Missing and not
// checked.
func compareMetrics(ms []leakMetric, before, after map[string]float64) []report.RemoteMetric {
	out := make([]report.RemoteMetric, 0, len(ms))
	for _, m := range ms {
		r := report.RemoteMetric{Name: m.name, Label: m.label, Tolerance: m.tolerance}
		b, okB := before[m.name]
		a, okA := after[m.name]
		if !okB || !okA || math.IsNaN(a) || math.IsNaN(b) {
			r.Missing = true
		} else {
			r.Before, r.After = b, a
			r.Leak = a > b+m.tolerance
		}
		out = append(out, r)
	}
	return out
}

// metricsClient reads the endpoint: a connection per reading (no idle
// keep-alive connection left on the server between the readings to count
// as an fd and a goroutine), no proxy, no redirect to another host.
func metricsClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// reading is one read of a server's metrics endpoint.
type reading struct {
	values map[string]float64 // the leak metrics it has
	// closeDelay is the server's close-delay histogram, nil if it has none
	// or it could not be read (closeDelayErr says why).
	closeDelay    *report.ServerHistogram
	closeDelayErr error
}

// scrape reads the leak metrics and the close-delay histogram of a server
// whose own metrics are prefixed ns from target, in at most
// metricsFetchTimeout (parseReading).
func scrape(ctx context.Context, c *http.Client, target, ns string) (reading, error) {
	body, err := fetchMetrics(ctx, c, target)
	if err == nil {
		var r reading
		if r, err = parseReading(body, ns); err == nil {
			return r, nil
		}
		err = fmt.Errorf("loadtest: metrics: %s: %w", target, err)
	}
	return reading{}, err
}

// fetchMetrics reads the exposition at target, in at most
// metricsFetchTimeout.
func fetchMetrics(ctx context.Context, c *http.Client, target string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("loadtest: metrics: %w", err)
	}
	req.Header.Set("Accept", textFormat)
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("loadtest: metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("loadtest: metrics: %s: %s", target, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "text/plain" {
			return nil, fmt.Errorf("loadtest: metrics: %s: content type %q, want the Prometheus text format", target, ct)
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, resp.Body, metricsMaxBody))
	if err != nil {
		return nil, fmt.Errorf("loadtest: metrics: %s: %w", target, err)
	}
	return body, nil
}

// textFormat is the exposition format expfmt's TextParser reads, not the
// protobuf or OpenMetrics ones client_golang may negotiate.
const textFormat = "text/plain;version=0.0.4"

// parseReading reads the leak metrics and the close-delay histogram of a
// server whose own metrics are prefixed ns out of an exposition. An
// exposition that does not parse is its error; a close-delay histogram
// that does not make one is the reading's closeDelayErr (the leak check
// does not need it).
func parseReading(body []byte, ns string) (reading, error) {
	v, err := promsample.Decode(bytes.NewReader(body))
	if err != nil {
		return reading{}, err
	}
	var names []string
	for _, m := range leakMetrics(ns) {
		names = append(names, m.name)
	}
	r := reading{values: promsample.Sum(v, names...)}
	name := CloseDelayMetric(ns)
	if h, ok, err := promsample.ClassicHistogram(v, name); err != nil {
		r.closeDelayErr = err
	} else if ok {
		r.closeDelay, r.closeDelayErr = serverHistogram(name, h)
	}
	return r, nil
}

// serverHistogram turns a histogram read from an exposition into the
// report's form: whole counts, the +Inf bucket as the count.
func serverHistogram(name string, h promsample.Histogram) (*report.ServerHistogram, error) {
	whole := func(v float64) (uint64, error) {
		if v < 0 || v > 1<<53 || v != math.Trunc(v) {
			return 0, fmt.Errorf("loadtest: %s: count %v is not a whole number", name, v)
		}
		return uint64(v), nil
	}
	n := len(h.Bounds) - 1 // promsample.ClassicHistogram ends them with +Inf
	out := &report.ServerHistogram{Metric: name, Bounds: h.Bounds[:n], Counts: make([]uint64, n), Sum: h.Sum}
	var err error
	if out.Count, err = whole(h.Count); err != nil {
		return nil, err
	}
	for i, c := range h.Counts[:n] {
		if out.Counts[i], err = whole(c); err != nil {
			return nil, err
		}
	}
	if math.IsNaN(h.Sum) || math.IsInf(h.Sum, 0) {
		return nil, fmt.Errorf("loadtest: %s: sum %v is not a number", name, h.Sum)
	}
	return out, nil
}

// HandlerCloseDelay reads the close-delay histogram from an embedded
// server's metrics handler, in memory; nil, nil if it has none.
func HandlerCloseDelay(h http.Handler) (*report.ServerHistogram, error) {
	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", textFormat)
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		return nil, fmt.Errorf("loadtest: server metrics: status %d", w.Code)
	}
	r, err := parseReading(w.Body.Bytes(), DefaultNamespace)
	if err != nil {
		return nil, fmt.Errorf("loadtest: server metrics: %w", err)
	}
	return r.closeDelay, r.closeDelayErr
}

// closeDelayDiff is this run's part of an external server's close delay
// (the histogram called name): the after reading minus the before one. It
// returns nil and a note to report when it cannot tell, nil and no note
// when the server exports no such histogram.
func closeDelayDiff(name string, before, after reading) (*report.ServerHistogram, string) {
	what := "server's own close delay (" + name + ") not reported: "
	switch b, a := before.closeDelay, after.closeDelay; {
	case before.closeDelayErr != nil:
		return nil, what + before.closeDelayErr.Error()
	case after.closeDelayErr != nil:
		return nil, what + after.closeDelayErr.Error()
	case b == nil && a == nil:
		return nil, ""
	case b == nil || a == nil:
		return nil, what + "exposed in only one of the readings before and after the run"
	default:
		d, err := a.Sub(b)
		if err != nil {
			return nil, what + err.Error()
		}
		return d, ""
	}
}

// LeakCheck is the leak check of one run. It is used by one goroutine.
type LeakCheck struct {
	target string
	ns     string // the server's metrics namespace
	client *http.Client
	before reading
}

// StartLeakCheck takes the before reading from target, for a server
// whose own metrics are prefixed ns. An endpoint that cannot be read is an
// error now, rather than a missing check after a long run.
func StartLeakCheck(ctx context.Context, target, ns string) (*LeakCheck, error) {
	c := &LeakCheck{target: target, ns: ns, client: metricsClient()}
	var err error
	if c.before, err = scrape(ctx, c.client, target, ns); err != nil {
		return nil, fmt.Errorf("%w (the leak check reads -metrics before the run)", err)
	}
	return c, nil
}

// Finish reads the endpoint again after the run, every metricsPoll until
// nothing looks leaked or SettleWait has passed, and records the
// figures in res: res.Remote, a leak (res.Leaks) like embedded mode's, and
// notes for metrics the server does not expose and runs too small for the
// tolerances. opened is the number of connections the run opened.
func (c *LeakCheck) Finish(res *report.Result, opened int) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), SettleWait)
	defer cancel()
	rm := &report.Remote{URL: c.target}
	res.Remote = rm
	var lastErr error
	var after reading // the last reading, once rm.Metrics is set
poll:
	for {
		r, err := scrape(ctx, c.client, c.target, c.ns)
		switch {
		case err == nil:
			after = r
			rm.Metrics, rm.Settled = compareMetrics(leakMetrics(c.ns), c.before.values, r.values), time.Since(start)
			if len(rm.Leaks()) == 0 {
				break poll
			}
		case lastErr == nil || ctx.Err() == nil: // not just our own deadline cutting a request
			lastErr = err
		}
		select {
		case <-ctx.Done():
			break poll
		case <-time.After(metricsPoll):
		}
	}
	if rm.Metrics == nil {
		rm.Metrics = compareMetrics(leakMetrics(c.ns), c.before.values, nil)
		for i := range rm.Metrics { // keep what was read before
			if v, ok := c.before.values[rm.Metrics[i].Name]; ok {
				rm.Metrics[i].Before = v
			}
		}
		rm.Err = lastErr.Error()
		res.Limits = append(res.Limits, fmt.Sprintf("leak check: the server's metrics could not be read after the run: %v", lastErr))
		return
	}
	var note string
	if res.CloseDelay, note = closeDelayDiff(CloseDelayMetric(c.ns), c.before, after); note != "" {
		res.Notes = append(res.Notes, note)
	}
	var leaks, missing []string
	for _, m := range rm.Metrics {
		switch {
		case m.Missing:
			missing = append(missing, m.Name)
		case m.Leak:
			leaks = append(leaks, fmt.Sprintf("%s %g -> %g", m.Label, m.Before, m.After))
		}
	}
	if len(leaks) > 0 {
		res.Leaks = append(res.Leaks, fmt.Sprintf("the server (%s) still has %s %s after every client closed",
			c.target, strings.Join(leaks, ", "), rm.Settled.Round(time.Millisecond)))
	}
	if len(missing) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("leak check: %s not exposed by %s before and after the run: not checked", strings.Join(missing, ", "), c.target))
	}
	if opened <= goroutineTolerance {
		res.Notes = append(res.Notes, fmt.Sprintf("leak check: the run opened %d connections, within the fd and goroutine tolerances (%d, %d): a leak of one per connection would not show there",
			opened, fdTolerance, goroutineTolerance))
	}
}
