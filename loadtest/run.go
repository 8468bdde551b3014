package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/netwheel/netwheel/internal/limits"
	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/fincap"
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
	// its own close delay (report.CloseDelayMetric).
	MetricsHandler() http.Handler
	Shutdown(ctx context.Context) error
}

// plan is this process's share of the connections, after the shard split and
// the file-descriptor and port limits.
type plan struct {
	conns   map[string]int
	churn   float64
	sources []net.IP
	limits  []string
	notes   []string
}

// makePlan splits the requested connections by shard and fits them into
// fdLimit open files (embedded: client and server share them) and ports
// ephemeral ports per source address.
func makePlan(o *options, fdLimit uint64, ports int, loopback bool) plan {
	p := plan{conns: map[string]int{}, churn: o.churnRate / float64(o.shardN)}
	total := 0
	for _, s := range o.scenarios {
		if s == scenario.Churn || s == scenario.Connflood {
			continue
		}
		p.conns[s] = shareOf(requested(o, s), o.shardI, o.shardN)
		total += p.conns[s]
	}
	if hasScenario(o, scenario.Churn) {
		total += churnConns(p.churn) // churn conns live ~ tens of ms; a generous allowance
	}
	perConn, reserve := 1, 100
	if o.addr == "" {
		perConn = 2 // the server's end is in this process too
	}
	budget := (int(min(fdLimit, math.MaxInt32)) - reserve) / perConn
	way := "drive a server in another process with -addr, or split the test with -shard i/n over several processes"
	if o.addr != "" {
		way = "split the test with -shard i/n over several processes or hosts"
	}
	if total > budget && total > 0 {
		scale := float64(budget) / float64(total)
		got := 0
		for s, n := range p.conns {
			p.conns[s] = int(float64(n) * scale)
			got += p.conns[s]
		}
		p.limits = append(p.limits, fmt.Sprintf("file descriptors: %d open files allowed per process (%d per connection here); ran %d of the %d connections requested; %s",
			fdLimit, perConn, got, total, way))
	}
	if hasScenario(o, scenario.Connflood) {
		// connflood runs alone, after the others: its own budget.
		n := shareOf(requested(o, scenario.Connflood), o.shardI, o.shardN)
		if n > budget {
			p.limits = append(p.limits, fmt.Sprintf("file descriptors: %d open files allowed per process (%d per connection here); connflood opened %d of the %d connections requested, maybe not beyond the server's limit; %s",
				fdLimit, perConn, budget, n, way))
			n = budget
		}
		p.conns[scenario.Connflood] = n
	}
	total = 0
	for s, n := range p.conns {
		if s != scenario.Connflood {
			total += n
		}
	}
	total = max(total, p.conns[scenario.Connflood])
	if usable := ports * 9 / 10; total > usable {
		if loopback {
			k := (total + usable - 1) / usable
			for i := range k {
				p.sources = append(p.sources, net.IPv4(127, 0, 0, byte(1+i)))
			}
			p.notes = append(p.notes, fmt.Sprintf("%d connections exceed the %d ephemeral ports of one source address: dialing from 127.0.0.1-%d", total, ports, k))
		} else {
			p.limits = append(p.limits, fmt.Sprintf("ephemeral ports: %d connections to one address exceed the %d ports of one source address; expect dial errors; split the test with -shard over hosts", total, ports))
		}
	}
	return p
}

// requested returns the connections asked for scenario s, all shards
// together: -conns for the polite scenarios, the hostile ones' own flags.
func requested(o *options, s string) int {
	if notApplicable(o, s) != "" {
		return 0
	}
	switch s {
	case scenario.Nonreader:
		return o.nonreaders
	case scenario.Splitter:
		return o.splitters
	case scenario.Pingflood:
		return o.pingflooders
	case scenario.Garbage:
		return o.garbageConns
	case scenario.Connflood:
		return o.floodConns
	}
	return o.conns
}

func hasScenario(o *options, s string) bool {
	for _, x := range o.scenarios {
		if x == s {
			return true
		}
	}
	return false
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && report.LoopbackHost(host)
}

// hardBound is the longest a run may take: the duration plus the longest
// timer under test, the slack and a margin. The attack stops by itself
// well before; this only bounds a broken server.
func hardBound(o *options) time.Duration {
	t := o.timeouts
	_, giveUp, _ := attack.Ladder(t)
	longest := max(t.Idle, t.DeadPeerAfter(), t.Frame, t.Handshake, giveUp)
	d := o.duration + o.barrier + o.spread + longest + t.Slack + o.horizon + 20*time.Second
	if hasScenario(o, scenario.Connflood) {
		d += o.barrier + o.floodHold // after the others: its dials, then the hold
	}
	return d
}

// newFigures returns the empty figures of each scenario of o, as the
// scenario table describes them.
func newFigures(o *options) map[string]*report.Scenario {
	figs := map[string]*report.Scenario{}
	ladder, giveUp, _ := attack.Ladder(o.timeouts)
	for _, s := range o.scenarios {
		sp := scenario.Lookup(s)
		f := report.NewScenario(s, sp.Expect)
		f.Hostile, f.Proto, f.NotApplicable, f.Horizon = sp.Hostile, o.proto.String(), notApplicable(o, s), o.horizon
		f.AnswerWait, f.DialWait = attack.DefaultAnswerWait, attack.DialTimeout
		switch s {
		case scenario.Retransmit:
			f.Ladder, f.GiveUpAt = ladder, giveUp
		case scenario.Connflood:
			f.Limit = o.maxConns
		case scenario.Nonreader:
			f.FloodBytes = o.hostileBytes
		}
		if sp.FillsOutput {
			// The floods' sending window, and the drain after it, in which
			// a close may first be seen.
			f.CloseWithin = o.duration + attack.HostileDrain
		}
		figs[s] = f
	}
	return figs
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
		HostileBytes: o.hostileBytes, FloodHold: o.floodHold, Payload: o.payload, Expect: o.expect, CloseHorizon: o.horizon}
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
			res.Notes = append(res.Notes, fmt.Sprintf("server's own close delay (%s) not reported: %v", report.CloseDelayMetric, err))
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

// progress prints a live line every second when stdout is a terminal and
// -q is not set; the returned function stops it and clears the line.
func progress(o *options, ctr *attack.Counters, srv embeddedServer, srvPeak *int64, stdout io.Writer) func() {
	f, ok := stdout.(*os.File)
	tty := ok && isTerminal(f)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		start := time.Now()
		var lastRecv int64
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			if srv != nil {
				*srvPeak = max(*srvPeak, srv.Stats().Open)
			}
			if !tty || o.quiet {
				continue
			}
			recv := ctr.Recv.Load()
			fmt.Fprintf(stdout, "\r\033[K%3.0fs  open %d  msgs/s %d  dial errors %d  errors %d  ended: %s",
				time.Since(start).Seconds(), ctr.Open.Load(), recv-lastRecv, ctr.DialErrors.Load(), ctr.Errors.Load(), endsLine(ctr.Ends()))
			lastRecv = recv
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if tty && !o.quiet {
			fmt.Fprint(stdout, "\r\033[K")
		}
	}
}

func endsLine(m map[string]int64) string {
	s := ""
	for _, k := range []string{"idle", "dead_peer", "frame_deadline", "retransmit_give_up", "output_limit", "unacked_limit", "overload",
		"protocol_error", "frame_too_large", "write_stall", "eof", "reset", report.EndBadServerFrame, "client"} {
		if m[k] > 0 {
			s += fmt.Sprintf("%s=%d ", k, m[k])
		}
	}
	return s
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// openFINs starts the capture of the FINs the server at target sends on
// the loopback; without the privilege or a loopback target it returns a
// note saying why there is none.
func openFINs(target string) (*fincap.Capture, string, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, "", fmt.Errorf("loadtest: -fins: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return nil, "-fins: not done: the server is not at an IPv4 loopback address", nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, "", fmt.Errorf("loadtest: -fins: port %q: %w", port, err)
	}
	c, err := fincap.Open(uint16(n))
	if err != nil { // best effort: a note, not a failed run
		return nil, "-fins: not done: " + err.Error(), nil
	}
	return c, "", nil
}
