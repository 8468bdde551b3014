package netserver

import (
	"fmt"
	"maps"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netwheel/netwheel/wheel"
)

// metrics are the server's Prometheus metrics. Counters read the server's
// own atomics (so Stats and /metrics agree); the histograms are
// client_golang's, safe from any goroutine.
type metrics struct {
	rtt     prometheus.Histogram
	rto     prometheus.Histogram
	late    prometheus.Histogram
	handler http.Handler
}

// closeDelayBuckets resolve the close delay finely where a wheel with a
// millisecond tick should put it (up to a few milliseconds) and coarsely in
// the tail, up to a second.
var closeDelayBuckets = []float64{
	0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008,
	0.010, 0.0125, 0.015, 0.020, 0.025, 0.030, 0.040, 0.050, 0.075, 0.100, 0.150, 0.200, 0.300, 0.500, 1,
}

func newMetrics(s *Server, reg prometheus.Registerer) (*metrics, error) {
	ns := s.cfg.MetricsNamespace // resolved by New
	labels := s.cfg.MetricsLabels
	name := func(n string) string { return ns + "_" + n }
	m := &metrics{
		rtt: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        name("rtt_seconds"),
			Help:        "Round-trip times sampled from acknowledged DATA frames (RFC 6298, Karn's rule).",
			Buckets:     prometheus.ExponentialBuckets(0.0001, 2, 18),
			ConstLabels: labels,
		}),
		rto: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        name("rto_seconds"),
			Help:        "Retransmission timeout in force at each retransmission, backoff included.",
			Buckets:     prometheus.ExponentialBuckets(0.01, 2, 14),
			ConstLabels: labels,
		}),
		late: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: name("timeout_close_delay_seconds"),
			Help: "How long after its deadline a timeout of the idle tracker (idle, keepalive, dead peer, handshake, frame, max age) " +
				"closed its connection: from the deadline on the wheel's clock (the tick of the last activity plus the timeout) " +
				"to the event loop acting on it. Includes the rounding to the tick; never negative.",
			Buckets:     closeDelayBuckets,
			ConstLabels: labels,
		}),
	}
	// MetricsHandler serves a registry of the server's own, whether or not
	// the metrics also go to the caller's Registerer; like a default
	// registry, it carries the Go runtime and process metrics too.
	own := prometheus.NewRegistry()
	wheelStat := func(f func(w *wheel.Wheel) float64) func() float64 {
		return func() float64 {
			if w := s.wheelPub.Load(); w != nil {
				return f(w)
			}
			return 0
		}
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	cs := []prometheus.Collector{
		m.rtt, m.rto, m.late,
		gauge(name("connections_open"), "Connections open now.", func() float64 { return float64(s.open.Load()) }),
		counter(name("connections_accepted_total"), "Connections accepted.", func() float64 { return float64(s.accepted.Load()) }),
		gauge(name("timers_pending"), "Timers pending in the wheel.", wheelStat(func(w *wheel.Wheel) float64 { return float64(w.Len()) })),
		counter(name("expiries_total"), "Timer expiries handed to event loops.", func() float64 { return float64(s.expiries.Load()) }),
		counter(name("keepalive_probes_total"), "Keepalive PINGs sent.", func() float64 { return float64(s.probes.Load()) }),
		counter(name("retransmissions_total"), "DATA frames retransmitted.", func() float64 { return float64(s.retransmits.Load()) }),
		counter(name("wheel_wakeups_total"), "Times the timer wheel's goroutine woke: none while idle, and otherwise only when a timer falls due (the event loops arm their timers from exact times, so the wheel keeps no clock for them).",
			wheelStat(func(w *wheel.Wheel) float64 { return float64(w.Wakeups()) })),
		counter(name("retransmit_giveups_total"), "Connections closed because retransmission gave up.", func() float64 {
			return float64(s.closed[ReasonGiveUp].Load())
		}),
		gauge(name("connection_sources"), "Sources (client addresses cut to Config.SourceIPv4Bits or SourceIPv6Bits, loopback aside) holding connections now; "+
			"0 without a per-source bound. Refusals over the bound are connections_closed_total{reason=\"source_limit\"}.",
			func() float64 {
				if c := s.sourcesPub.Load(); c != nil {
					return float64(c.Sources())
				}
				return 0
			}),
		counter(name("shutdown_cuts_total"), "Connections Shutdown cut at its deadline, unfinished (also counted as closed with reason shutdown).",
			func() float64 { return float64(s.cuts.Load()) }),
	}
	for _, r := range Reasons() {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        name("connections_closed_total"),
			Help:        "Connections closed, by reason.",
			ConstLabels: withReason(labels, r),
		}, func() float64 { return float64(s.closed[r].Load()) }))
	}
	for i, c := range append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})) {
		err := own.Register(c)
		if reg != nil && i < len(cs) && err == nil {
			err = reg.Register(c)
		}
		if err != nil {
			return nil, fmt.Errorf("netserver: register metrics: %w", err)
		}
	}
	m.handler = promhttp.HandlerFor(own, promhttp.HandlerOpts{})
	return m, nil
}

// withReason returns labels with reason=r added, leaving labels alone
// (Validate refuses a label of their own named reason).
func withReason(labels prometheus.Labels, r Reason) prometheus.Labels {
	l := prometheus.Labels{"reason": r.String()}
	maps.Copy(l, labels)
	return l
}
