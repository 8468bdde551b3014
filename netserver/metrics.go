package netserver

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics. Counters read the server's
// own atomics (so Stats and /metrics agree); the histograms are
// client_golang's, safe from any goroutine.
type metrics struct {
	rtt     prometheus.Histogram
	rto     prometheus.Histogram
	handler http.Handler
}

func newMetrics(s *Server, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rtt: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "netwheel_rtt_seconds",
			Help:    "Round-trip times sampled from acknowledged DATA frames (RFC 6298, Karn's rule).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		rto: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "netwheel_rto_seconds",
			Help:    "Retransmission timeout in force at each retransmission, backoff included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
	}
	own := reg == nil
	var r *prometheus.Registry
	if own {
		r = prometheus.NewRegistry()
		reg = r
		// A registry of our own also carries the Go runtime and process
		// metrics a default one would have.
		if err := r.Register(collectors.NewGoCollector()); err != nil {
			return nil, fmt.Errorf("netserver: register metrics: %w", err)
		}
		if err := r.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, fmt.Errorf("netserver: register metrics: %w", err)
		}
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		m.rtt, m.rto,
		gauge("netwheel_connections_open", "Connections open now.", func() float64 { return float64(s.open.Load()) }),
		counter("netwheel_connections_accepted_total", "Connections accepted.", func() float64 { return float64(s.accepted.Load()) }),
		gauge("netwheel_timers_pending", "Timers pending in the wheel.", func() float64 {
			if s.wheel == nil {
				return 0
			}
			return float64(s.wheel.Len())
		}),
		counter("netwheel_expiries_total", "Timer expiries handed to event loops.", func() float64 { return float64(s.expiries.Load()) }),
		counter("netwheel_keepalive_probes_total", "Keepalive PINGs sent.", func() float64 { return float64(s.probes.Load()) }),
		counter("netwheel_retransmissions_total", "DATA frames retransmitted.", func() float64 { return float64(s.retransmits.Load()) }),
		counter("netwheel_retransmit_giveups_total", "Connections closed because retransmission gave up.", func() float64 {
			return float64(s.closed[ReasonGiveUp].Load())
		}),
	}
	for _, r := range Reasons() {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "netwheel_connections_closed_total",
			Help:        "Connections closed, by reason.",
			ConstLabels: prometheus.Labels{"reason": r.String()},
		}, func() float64 { return float64(s.closed[r].Load()) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("netserver: register metrics: %w", err)
		}
	}
	if own {
		m.handler = promhttp.HandlerFor(r, promhttp.HandlerOpts{})
	} else {
		m.handler = promhttp.Handler()
	}
	return m, nil
}
