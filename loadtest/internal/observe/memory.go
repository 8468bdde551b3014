package observe

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/netwheel/netwheel/internal/limits"
	"github.com/netwheel/netwheel/loadtest/internal/promsample"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// This file watches the server's resident memory while hostile scenarios
// run, and the harness process's own resources over the run.

// Process reads the harness process's goroutines, open files and CPU time
// before a run; the function it returns reads them after it, with its
// memory, and returns its figures (peakConns: the client connections open
// at once at most). It reads the goroutines and files 50 ms after the
// call, once exiting goroutines are gone.
func Process() func(peakConns int64) *report.Process {
	p, cpu0 := report.Process{}, limits.CPU()
	p.Goroutines[0], p.FDs[0] = runtime.NumGoroutine(), limits.OpenFiles()
	return func(peakConns int64) *report.Process {
		rss, peak := limits.Memory()
		p.CPU, p.RSSBytes, p.PeakRSSBytes, p.PeakConns = limits.CPU()-cpu0, rss, peak, peakConns
		time.Sleep(50 * time.Millisecond) // let exiting goroutines finish
		p.Goroutines[1], p.FDs[1] = runtime.NumGoroutine(), limits.OpenFiles()
		return &p
	}
}

// rssMetric is the resident memory client_golang's process collector
// exports, netserver's among them.
const rssMetric = "process_resident_memory_bytes"

// Sampling intervals: /proc is cheap to read; a metrics endpoint is read
// over HTTP, as often as the leak check polls it.
var (
	memEveryProc    = 50 * time.Millisecond
	memEveryMetrics = metricsPoll
)

// Source says where the server's memory can be read: Embedded, this
// process's own (the client's memory included); PID, that process's
// /proc/PID/status; Metrics, the endpoint's process_resident_memory_bytes.
type Source struct {
	Embedded bool
	PID      int
	Metrics  string
}

// memorySource returns how to read the server's RSS and where it comes
// from, or why it cannot be observed (why != "").
func memorySource(o Source) (read func(context.Context) (int64, error), source string, inProcess bool, why string) {
	switch {
	case o.Embedded:
		return func(context.Context) (int64, error) { return limits.RSS(0) }, "/proc/self/status", true, ""
	case o.PID > 0:
		pid := o.PID
		return func(context.Context) (int64, error) { return limits.RSS(pid) }, fmt.Sprintf("/proc/%d/status", pid), false, ""
	case o.Metrics != "":
		c, target := metricsClient(), o.Metrics
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

// MemorySampler samples the server's RSS every interval from its start
// until Stop, keeping the first, largest and last readings, and closes
// Exceeded once the growth passes the bound.
//
// Ownership: m and exceeded's closing belong to the sampler goroutine from
// start until stop has waited for it; then m is the caller's.
type MemorySampler struct {
	m        *report.Memory
	read     func(context.Context) (int64, error)
	every    time.Duration
	exceeded chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// StartMemory starts sampling the server's memory from o, against bound.
// Without a source, or if the first reading fails, nothing is sampled and
// the memory's Err says why.
func StartMemory(ctx context.Context, o Source, bound report.MemoryBound) *MemorySampler {
	read, source, inProcess, why := memorySource(o)
	m := &report.Memory{Source: source, InProcess: inProcess, Bound: bound, Err: why}
	every := memEveryProc
	if !o.Embedded && o.PID == 0 {
		every = memEveryMetrics
	}
	return startSampler(ctx, read, m, every)
}

// startSampler takes the first reading now, into m, and samples on every
// interval in a goroutine until stop. If m.Err is set already, or the
// first reading fails, it samples nothing.
func startSampler(ctx context.Context, read func(context.Context) (int64, error), m *report.Memory, every time.Duration) *MemorySampler {
	s := &MemorySampler{m: m, read: read, every: every, exceeded: make(chan struct{})}
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
func (s *MemorySampler) sample(ctx context.Context) {
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

// Exceeded is closed once the growth passed the bound.
func (s *MemorySampler) Exceeded() <-chan struct{} { return s.exceeded }

// Stop takes a last reading, stops the sampling and returns the figures.
// The goroutine that started s.
func (s *MemorySampler) Stop() *report.Memory {
	s.cancel()
	s.wg.Wait()
	if s.m.Samples > 0 {
		s.sample(context.Background())
	}
	return s.m
}
