package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/netwheel/netwheel/internal/limits"
	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/promsample"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// This file watches the server's resident memory while hostile scenarios
// run, and derives the growth a server whose per-connection limits hold is
// allowed: the judgement of the hostile runs besides each scenario's own.

// rssMetric is the resident memory client_golang's process collector
// exports, netserver's among them.
const rssMetric = "process_resident_memory_bytes"

// Sampling intervals: /proc is cheap to read; a metrics endpoint is read
// over HTTP, as often as the leak check polls it.
var (
	memEveryProc    = 50 * time.Millisecond
	memEveryMetrics = metricsPoll
)

// perOtherConn is the growth allowed per connection that reads what it
// gets (polite, splitter, garbage, connflood): its buffers and state and
// the runtime's around them. In-process it covers both ends of the
// connection and the client's goroutines: the default run's polite
// scenarios alone grow this process by 26-30 KiB per connection.
const perOtherConn = 32 << 10

// memorySource returns how to read the server's RSS and where it comes
// from, or why it cannot be observed (why != ""): embedded, this
// process's own (the client's memory included); -server-pid, that
// process's; -metrics, the endpoint's process_resident_memory_bytes.
func memorySource(o *options) (read func(context.Context) (int64, error), source string, inProcess bool, why string) {
	switch {
	case o.addr == "":
		return func(context.Context) (int64, error) { return limits.RSS(0) }, "/proc/self/status", true, ""
	case o.serverPID > 0:
		pid := o.serverPID
		return func(context.Context) (int64, error) { return limits.RSS(pid) }, fmt.Sprintf("/proc/%d/status", pid), false, ""
	case o.metrics != "":
		c, target := metricsClient(), o.metrics
		return func(ctx context.Context) (int64, error) {
			body, err := fetchMetrics(ctx, c, target)
			if err != nil {
				return 0, err
			}
			v, err := promsample.Decode(bytes.NewReader(body))
			if err != nil {
				return 0, fmt.Errorf("loadtest: metrics: %s: %w", target, err)
			}
			rss, ok := promsample.Sum(v, rssMetric)[rssMetric]
			if !ok || math.IsNaN(rss) {
				return 0, fmt.Errorf("loadtest: metrics: %s does not expose %s", target, rssMetric)
			}
			return int64(rss), nil
		}, target + " (" + rssMetric + ")", false, ""
	}
	return nil, "", false, "the server's memory is not observed: give -server-pid PID (a server on this host) or -metrics URL (its " + rssMetric + ")"
}

// churnConns is the allowance of churn connections open at once at rate
// connections a second: each lives tens of milliseconds.
func churnConns(rate float64) int { return int(math.Ceil(rate/5)) + 16 }

// memoryBound is the growth allowed to the server in a run of plan p: the
// output limit (and, framed, the unacknowledged-payload limit) of every
// connection that may not read, an allowance for every other connection
// open at once (connflood runs alone, so it counts only if it has more),
// and the fixed allowance.
func memoryBound(o *options, p plan) report.MemoryBound {
	b := report.MemoryBound{OutputLimit: o.outputLimit, Filling: map[string]int{}, PerOther: perOtherConn, Fixed: o.memAllowance}
	if o.proto == attack.Framed {
		b.UnackedLimit = o.unackedLimit
	}
	other := 0
	for s, n := range p.conns {
		switch {
		case s == scenario.Connflood:
		case scenario.Lookup(s).FillsOutput:
			if n > 0 {
				b.Filling[s] = n
			}
		default:
			other += n
		}
	}
	if hasScenario(o, scenario.Churn) {
		other += churnConns(p.churn)
	}
	b.Other = max(other, p.conns[scenario.Connflood])
	return b
}

// memSampler samples the server's RSS every interval from its start until
// stop, keeping the first, largest and last readings, and closes exceeded
// once the growth passes the bound.
//
// Ownership: m and exceeded's closing belong to the sampler goroutine from
// start until stop has waited for it; then m is the caller's.
type memSampler struct {
	m        *report.Memory
	read     func(context.Context) (int64, error)
	every    time.Duration
	exceeded chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// startMemSampler starts sampling the server's memory as o describes it,
// against bound. Without a source, or if the first reading fails, nothing
// is sampled and the memory's Err says why.
func startMemSampler(ctx context.Context, o *options, bound report.MemoryBound) *memSampler {
	read, source, inProcess, why := memorySource(o)
	m := &report.Memory{Source: source, InProcess: inProcess, Bound: bound, Err: why}
	every := memEveryProc
	if o.addr != "" && o.serverPID == 0 {
		every = memEveryMetrics
	}
	return startSampler(ctx, read, m, every)
}

// startSampler takes the first reading now, into m, and samples on every
// interval in a goroutine until stop. If m.Err is set already, or the
// first reading fails, it samples nothing.
func startSampler(ctx context.Context, read func(context.Context) (int64, error), m *report.Memory, every time.Duration) *memSampler {
	s := &memSampler{m: m, read: read, every: every, exceeded: make(chan struct{})}
	ctx, s.cancel = context.WithCancel(ctx)
	if m.Err != "" {
		return s
	}
	v, err := read(ctx)
	if err != nil {
		m.Err = "the server's memory could not be read: " + err.Error()
		return s
	}
	m.Before, m.Peak, m.End, m.Samples = v, v, v, 1
	s.wg.Go(func() {
		tk := time.NewTicker(s.every)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			s.sample(ctx)
		}
	})
	return s
}

// sample takes one reading; a failed one is skipped.
func (s *memSampler) sample(ctx context.Context) {
	v, err := s.read(ctx)
	if err != nil {
		return
	}
	m := s.m
	m.Samples++
	m.End, m.Peak = v, max(m.Peak, v)
	if !m.Stopped && m.Growth() > m.Bound.Total() {
		m.Stopped = true
		close(s.exceeded)
	}
}

// stop takes a last reading, stops the sampling and returns the figures.
func (s *memSampler) stop() *report.Memory {
	s.cancel()
	s.wg.Wait()
	if s.m.Samples > 0 {
		s.sample(context.Background())
	}
	return s.m
}

// anyHostile reports whether the run has a hostile scenario.
func anyHostile(o *options) bool {
	for _, s := range o.scenarios {
		if scenario.Lookup(s).Hostile {
			return true
		}
	}
	return false
}
