package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/netwheel/netwheel/internal/limits"
	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/embedded"
	"github.com/netwheel/netwheel/loadtest/internal/fincap"
	"github.com/netwheel/netwheel/loadtest/internal/lag"
	"github.com/netwheel/netwheel/loadtest/internal/observe"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

func run(ctx context.Context, o *options, stdout io.Writer) (*report.Result, error) {
	fdLimit, err := limits.RaiseFiles()
	if err != nil {
		return nil, err
	}
	res := &report.Result{Version: report.Version, Shards: []string{o.shard.String()}}
	process := observe.Process()

	var srv *embedded.Server
	target := o.Addr
	if o.Addr != "" {
		err = attack.Probe(ctx, o.Addr, o.Proto, attack.Payload(o.Payload, o.Size), o.Expect)
	} else if srv, err = embedded.Start(embeddedOptions(o)); err == nil {
		target = srv.Addr()
	}
	if err != nil {
		return nil, err
	}
	p := makePlan(o, fdLimit, limits.EphemeralPorts(), report.LoopbackAddr(target))
	res.Limits, res.Notes = p.limits, append(o.notes, p.notes...)
	res.Config = report.Config{Target: target, Server: "external", Proto: o.Proto.String(), Scenarios: o.Scenarios,
		Conns: map[string]int{}, Rate: o.Rate, Size: o.Size, Duration: o.Duration, Closed: o.Closed,
		ChurnRate: o.ChurnRate, Timeouts: o.Timeouts, Known: o.known, CloseHorizon: o.CloseHorizon}
	if srv != nil {
		res.Config.Target, res.Config.Server = "embedded "+target, "netwheel"
	}
	if o.Payload != nil || o.Expect.Kind != attack.AnswerEcho {
		res.Config.Payload, res.Config.Expect = string(o.Payload), o.Expect.String()
		if o.Payload == nil {
			res.Config.Payload = fmt.Sprintf("%d bytes of a letter pattern", o.Size)
		}
	}
	for _, s := range o.Scenarios {
		if s != scenario.Churn {
			res.Config.Conns[s] = requested(o, s)
		}
	}
	cfg := o.Config
	cfg.Addr, cfg.Sources, cfg.Conns, cfg.ChurnRate, cfg.Neighbours = target, p.sources, p.conns, p.churn, p.neighbours
	if o.fins {
		c, note, err := fincap.OpenLoopback(target)
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
		if o.shard.N > 1 {
			res.Notes = append(res.Notes, "leak check with -shard: the server also counts the other shards' connections, so only a shard that starts after and ends after all others can tell a leak from them; its close delay counts their closes too")
		}
	} else if o.Addr != "" {
		res.Notes = append(res.Notes, "leak check: not done; give -metrics with the server's Prometheus endpoint to check that no connection, timer, open file or goroutine leaked on it")
	}

	figs := report.NewScenarios(o.Scenarios, env(o), report.Scenario{Horizon: o.CloseHorizon, AnswerWait: attack.DefaultAnswerWait,
		DialWait: attack.DialTimeout, CloseWithin: o.Duration + attack.HostileDrain})
	var ms *observe.MemorySampler
	hostile := false // a hostile scenario that applies: the server's memory is watched
	for _, f := range figs {
		hostile = hostile || f.Hostile && f.NotApplicable == ""
	}
	if hostile {
		ms = observe.StartMemory(ctx, observe.Source{Embedded: o.Addr == "", PID: o.serverPID, Metrics: o.metrics}, o.bound.For(p.conns, p.churnOpen, p.neighbours, o.Proto == attack.Framed))
		cfg.Stop = ms.Exceeded()
	}
	var ctr attack.Counters
	stopProgress := progress(o, &ctr, srv, stdout)
	actx, cancel := context.WithTimeout(ctx, hardBound(o))
	mon := lag.Start(o.serverPID)
	res.Start = time.Now()
	out, err := attack.Run(actx, cfg, &ctr, func(r report.ConnResult) {
		figs[r.Scenario].Add(r, o.Timeouts, scenario.Lookup(r.Scenario).Expects(r.Role))
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
	if note := out.Barrier.Note(o.IdleSpread); note != "" {
		res.Notes = append(res.Notes, note)
	}
	for _, s := range o.Scenarios {
		f := figs[s]
		if h := out.Latency[s]; h != nil {
			f.Latency = h
		}
		f.Elapsed = out.Elapsed[s]
		res.Scenarios = append(res.Scenarios, f)
	}
	res.Limits = append(res.Limits, res.DialLimits()...)
	if note := res.NotEchoNote(); note != "" {
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
		srv.Finish(res)
	}
	res.Process = process(ctr.PeakOpen.Load())
	return res, nil
}

// embeddedOptions is what o says of the embedded server.
func embeddedOptions(o *options) embedded.Options {
	return embedded.Options{Proto: o.Proto, Timeouts: o.Timeouts, MaxConns: o.maxConns, OutputLimit: o.bound.OutputLimit, UnackedLimit: o.bound.UnackedLimit,
		Proxy: o.Proxy.Version != 0, MaxConnsPerSource: o.maxConnsPerSource}
}
