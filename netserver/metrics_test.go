package netserver_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// MetricsHandler serves the server's metrics when a custom Registerer is
// given too (it served the default registry then).
func TestMetricsHandler_WithCustomRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := framedCfg()
	cfg.Registerer = reg
	s := start(t, cfg, nil)
	dial(t, s).Push(frame.AppendPing(nil, 1))
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.Contains(t, rec.Body.String(), "netwheel_connections_accepted_total")
	assert.Contains(t, rec.Body.String(), "go_goroutines")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	assert.Contains(t, strings.Join(names, " "), "netwheel_connections_accepted_total", "the custom registry has them too")
}

// Stats and the metrics may be read from other goroutines while Start runs
// (the race detector fails this test if the wheel is shared unsafely).
func TestStatsDuringStart(t *testing.T) {
	s, err := netserver.New(withAddr(framedCfg()), netserver.Echo{})
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = s.Stats()
			s.MetricsHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
		}
	}()
	require.NoError(t, s.Start())
	time.Sleep(20 * time.Millisecond) // let the reader overlap the running server too
	close(stop)
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
}

// Two servers share one registry with their own constant labels, under a
// namespace of their own.
func TestMetrics_NamespaceAndLabelsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, name := range []string{"api", "admin"} {
		cfg := framedCfg()
		cfg.Registerer = reg
		cfg.MetricsNamespace = "edge"
		cfg.MetricsLabels = prometheus.Labels{"server": name}
		s := start(t, cfg, nil)
		if name == "api" {
			dial(t, s).Push(frame.AppendPing(nil, 1))
			require.Eventually(t, func() bool { return s.Stats().Accepted == 1 }, waitFor, time.Millisecond)
		}
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	accepted := map[string]float64{}
	for _, mf := range mfs {
		assert.True(t, strings.HasPrefix(mf.GetName(), "edge_"), mf.GetName())
		if mf.GetName() != "edge_connections_accepted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "server" {
					accepted[lp.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, map[string]float64{"api": 1, "admin": 0}, accepted)

	_, err = netserver.New(netserver.Config{Addr: ":0", MetricsLabels: prometheus.Labels{"reason": "x"}}, netserver.Echo{})
	assert.ErrorIs(t, err, netserver.ErrConfig, "reason is the close counters' label")
	_, err = netserver.New(netserver.Config{Addr: ":0", MetricsNamespace: "no-dashes"}, netserver.Echo{})
	assert.ErrorIs(t, err, netserver.ErrConfig)
}
