package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/netwheel/netwheel/internal/limits"
	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/lag"
	"github.com/netwheel/netwheel/loadtest/internal/observe"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// embeddedServer is the netwheel server a run without -addr drives
// (embedded.go). Its methods may be called from any goroutine.
type embeddedServer interface {
	Addr() net.Addr
	Stats() report.Server
	// MetricsHandler serves the server's Prometheus metrics, which hold
	// its own close delay (observe.CloseDelayMetric).
	MetricsHandler() http.Handler
	Shutdown(ctx context.Context) error
}

func run(ctx context.Context, o *options, stdout io.Writer) (*report.Result, error) {
	fdLimit, err := limits.RaiseFiles()
	if err != nil {
		return nil, err
	}
	res := &report.Result{Version: report.Version, Shards: []string{fmt.Sprintf("%d/%d", o.shardI+1, o.shardN)}}
	before := report.Process{}
	before.Goroutines[0], before.FDs[0] = runtime.NumGoroutine(), limits.OpenFiles()
	cpu0 := limits.CPU()

	var srv embeddedServer
	target := o.addr
	if o.addr != "" {
		hello := attack.Hello(o.proto, attack.Payload(o.payload, o.size))
		if o.proto == attack.Raw && o.expect.Kind == attack.AnswerNone {
			hello = nil // the server answers nothing: an open connection is all a probe can see
		}
		if err := probe(ctx, o.addr, hello); err != nil {
			return nil, err
		}
	}
	if o.addr == "" {
		if srv, err = startNetserver(o); err != nil {
			return nil, err
		}
		target = srv.Addr().String()
	}
	p := makePlan(o, fdLimit, limits.EphemeralPorts(), isLoopback(target))
	res.Limits, res.Notes = p.limits, append(o.notes, p.notes...)
	targetName := target
	if o.addr == "" {
		targetName = "embedded " + target
	}
	res.Config = report.Config{Target: targetName, Server: o.server, Proto: o.proto.String(), Scenarios: o.scenarios,
		Conns: map[string]int{}, Rate: o.rate, Size: o.size, Duration: o.duration, Closed: o.closed,
		ChurnRate: o.churnRate, Timeouts: o.timeouts, Known: o.known, CloseHorizon: o.horizon}
	if o.payload != nil || o.expect.Kind != attack.AnswerEcho {
		res.Config.Payload, res.Config.Expect = string(o.payload), o.expect.String()
		if o.payload == nil {
			res.Config.Payload = fmt.Sprintf("%d bytes of a letter pattern", o.size)
		}
	}
	for _, s := range o.scenarios {
		if s != scenario.Churn {
			res.Config.Conns[s] = requested(o, s)
		}
	}
	cfg := attack.Config{Addr: target, Proto: o.proto, Sources: p.sources, Scenarios: o.scenarios, Conns: p.conns,
		Rate: o.rate, Closed: o.closed, Size: o.size, Duration: o.duration, ChurnRate: p.churn,
		Timeouts: o.timeouts, DialConcurrency: o.dialConc, IdleSpread: o.spread, BarrierTimeout: o.barrier,
		HostileBytes: o.hostileBytes, FloodHold: o.floodHold, Payload: o.payload, Expect: o.expect, CloseHorizon: o.horizon,
		Proxy: o.edge.proxy, Neighbours: p.neighbours}
	if o.fins {
		c, note, err := openFINs(target)
		if err != nil {
			return nil, err
		}
		if c != nil {
			defer c.Close() // on an early return; closed after the attack otherwise
			cfg.FINs = c
		}
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
	}

	var rc *observe.LeakCheck
	if o.metrics != "" {
		if rc, err = observe.StartLeakCheck(ctx, o.metrics, o.metricsNS); err != nil {
			return nil, err
		}
		if o.shardN > 1 {
			res.Notes = append(res.Notes, "leak check with -shard: the server also counts the other shards' connections, so only a shard that starts after and ends after all others can tell a leak from them; its close delay counts their closes too")
		}
	} else if o.addr != "" {
		res.Notes = append(res.Notes, "leak check: not done; give -metrics with the server's Prometheus endpoint to check that no connection, timer, open file or goroutine leaked on it")
	}

	figs := newFigures(o)
	var ms *observe.MemorySampler
	if anyHostile(o) {
		ms = observe.StartMemory(ctx, observe.Source{Embedded: o.addr == "", PID: o.serverPID, Metrics: o.metrics}, memoryBound(o, p))
		cfg.Stop = ms.Exceeded()
	}
	var ctr attack.Counters
	var srvPeak int64
	stopProgress := progress(o, &ctr, srv, &srvPeak, stdout)
	actx, cancel := context.WithTimeout(ctx, hardBound(o))
	mon := lag.Start(o.serverPID)
	res.Start = time.Now()
	out, err := attack.Run(actx, cfg, &ctr, func(r report.ConnResult) {
		figs[r.Scenario].Add(r, o.timeouts, scenario.Lookup(r.Scenario).Expects(r.Role))
	})
	if cfg.FINs != nil {
		cfg.FINs.Close() // before the leak check counts goroutines and files
	}
	res.End = time.Now()
	res.SelfLag = mon.Stop()
	hitBound := errors.Is(actx.Err(), context.DeadlineExceeded)
	cancel()
	stopProgress()
	if ms != nil {
		res.Memory = ms.Stop()
		if nr := figs[scenario.Nonreader]; nr != nil && res.Memory.Stopped {
			nr.FloodStoppedOpen = nr.FloodCut // their floods ended at the memory verdict, not with the window
		}
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		res.Notes = append(res.Notes, "interrupted: the figures cover the run up to the interrupt")
	} else if hitBound {
		res.Limits = append(res.Limits, fmt.Sprintf("the run hit its hard time bound (%s): the server stopped answering or closing", hardBound(o)))
	}
	if b := out.Barrier; b.Waiting > 0 {
		note := fmt.Sprintf("quiet connections: all %d open (or failed) %s after the start; last messages spread over %s", b.Waiting, b.Wait.Round(time.Millisecond), o.spread)
		if b.TimedOut {
			note = fmt.Sprintf("quiet connections: the barrier gave up after %s with %d of %d open (or failed); the late ones sent at once; last messages spread over %s",
				b.Wait.Round(time.Millisecond), b.Arrived, b.Waiting, o.spread)
		}
		res.Notes = append(res.Notes, note)
	}
	for _, s := range o.scenarios {
		f := figs[s]
		if h := out.Latency[s]; h != nil {
			f.Latency = h
		}
		f.Elapsed = out.Elapsed[s]
		res.Scenarios = append(res.Scenarios, f)
		if n := f.DialErrors["fd_limit"]; n > 0 {
			res.Limits = append(res.Limits, fmt.Sprintf("%s: %d connections hit the open-file limit; use -addr with the server in another process, or -shard", s, n))
		}
		if n := f.DialErrors["ephemeral_ports"]; n > 0 {
			res.Limits = append(res.Limits, fmt.Sprintf("%s: %d connections ran out of ephemeral ports; use -shard over several hosts", s, n))
		}
	}
	if note := notEchoNote(o, res.Scenarios); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if rc != nil {
		opened := 0
		for _, f := range res.Scenarios {
			opened += f.Opened
		}
		rc.Finish(res, opened)
	}
	if srv != nil {
		// Every client has closed: the server must get back to nothing,
		// within settleRunning of this process's running time.
		st := srv.Stats()
		waitRunning(settleRunning, settleBound, func() bool {
			st = srv.Stats()
			return st.Open == 0 && st.TimersPending == 0
		})
		st.PeakOpen = max(st.PeakOpen, srvPeak)
		res.Server = &st
		if st.Open > 0 || st.TimersPending > 0 {
			res.Leaks = append(res.Leaks, fmt.Sprintf("the server still holds %d connections and %d timers %s (of this process's running time) after every client closed", st.Open, st.TimersPending, settleRunning))
		}
		if res.CloseDelay, err = observe.HandlerCloseDelay(srv.MetricsHandler()); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("server's own close delay (%s) not reported: %v", observe.CloseDelayMetric(observe.DefaultNamespace), err))
		}
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := srv.Shutdown(sctx); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("server shutdown: %v", err))
		}
		scancel()
	}
	rss, peak := limits.Memory()
	pr := before
	pr.CPU, pr.RSSBytes, pr.PeakRSSBytes, pr.PeakConns = limits.CPU()-cpu0, rss, peak, ctr.PeakOpen.Load()
	time.Sleep(50 * time.Millisecond) // let exiting goroutines finish
	pr.Goroutines[1], pr.FDs[1] = runtime.NumGoroutine(), limits.OpenFiles()
	res.Process = &pr
	return res, nil
}

// notEchoNote returns a hint when an external server taken for an echo
// server (no -payload, -expect or -preset) answered none of the messages
// its polite scenarios sent: it may speak another protocol.
func notEchoNote(o *options, figs []*report.Scenario) string {
	if o.addr == "" || o.proto != attack.Raw || o.payload != nil || o.expect.Kind != attack.AnswerEcho {
		return ""
	}
	var sent, recv uint64
	for _, f := range figs {
		if !f.Hostile { // a hostile peer may not read what is echoed (nonreader)
			sent, recv = sent+f.Sent, recv+f.Recv
		}
	}
	if sent > 0 && recv == 0 {
		return "no message was echoed: if the server speaks another protocol, say what to send and what it answers with -preset (redis, memcached, http, line) or -payload and -expect"
	}
	return ""
}

// errUnreachable is run's error when -addr cannot be connected to: the
// exit status is 1, as for a failed judgement.
var errUnreachable = errors.New("loadtest: cannot reach the server")

// probeTimeout bounds the probe run makes of -addr before the scenarios
// start: its dial, and the wait for the answer to its message.
const probeTimeout = 3 * time.Second

// probe opens one connection to addr and, with hello, sends it and waits
// for any byte back, or the server's close, so that a server that refuses,
// is unreachable, or never accepts (its listener's backlog completes the
// handshake, but no byte ever comes back) fails the run within
// probeTimeout with one line rather than with a report of every
// connection failing.
func probe(ctx context.Context, addr string, hello []byte) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", errUnreachable, addr, err)
	}
	defer c.Close()
	if hello == nil {
		return nil
	}
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(hello); err != nil {
		return nil // closed at once (a refusal, say): the run reports it
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w at %s: it answered nothing within %s: it may not accept connections, or speak another protocol (say what it answers with -preset, or -payload and -expect; -expect none if it never answers)", errUnreachable, addr, probeTimeout)
	}
	return nil
}

// settleRunning is how long the embedded server is given to get back to
// no connection and no timer once every client has closed, counted in
// time this process was running (waitRunning); settleBound bounds the wait
// on a machine that starves it.
const (
	settleRunning = 2 * time.Second
	settleBound   = 30 * time.Second
)

// waitRunning polls done every 20 ms until it reports true or this process
// has had running time d, not counting the time it was kept waiting for
// the CPU (a poll that comes late extends the wait by its lateness), or
// bound has passed. It reports whether done did.
func waitRunning(d, bound time.Duration, done func() bool) bool {
	const every = 20 * time.Millisecond
	start := time.Now()
	deadline := start.Add(d)
	for !done() {
		now := time.Now()
		if !now.Before(deadline) || now.Sub(start) >= bound {
			return false
		}
		time.Sleep(every)
		if late := time.Since(now) - every; late > time.Millisecond {
			deadline = deadline.Add(late)
		}
	}
	return true
}
