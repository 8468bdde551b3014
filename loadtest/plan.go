package main

import (
	"fmt"
	"math"
	"net"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// This file plans a run: each scenario's share of the connections, its
// figures as the scenario table describes them, the time bound, and the
// growth of the server's memory allowed.

// plan is this process's share of the connections, after the shard split and
// the file-descriptor and port limits.
type plan struct {
	conns map[string]int
	churn float64
	// neighbours is sourceflood's other sources (conns holds the
	// flooding source's connections).
	neighbours int
	sources    []net.IP
	limits     []string
	notes      []string
}

// makePlan splits the requested connections by shard and fits them into
// fdLimit open files (embedded: client and server share them) and ports
// ephemeral ports per source address.
func makePlan(o *options, fdLimit uint64, ports int, loopback bool) plan {
	p := plan{conns: map[string]int{}, churn: o.churnRate / float64(o.shardN)}
	total := 0
	for _, s := range o.scenarios {
		if s == scenario.Churn || scenario.Lookup(s).Alone {
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
	if hasScenario(o, scenario.Sourceflood) && notApplicable(o, scenario.Sourceflood) == "" {
		// sourceflood runs alone too, after connflood: its own budget,
		// the flood first.
		n := shareOf(requested(o, scenario.Sourceflood), o.shardI, o.shardN)
		m := shareOf(o.conns, o.shardI, o.shardN)
		if n+m > budget {
			p.limits = append(p.limits, fmt.Sprintf("file descriptors: %d open files allowed per process (%d per connection here); sourceflood opened %d of the %d connections requested; %s",
				fdLimit, perConn, budget, n+m, way))
			n = min(n, budget)
			m = budget - n
		}
		p.conns[scenario.Sourceflood], p.neighbours = n, m
	}
	total = 0
	for s, n := range p.conns {
		if !scenario.Lookup(s).Alone {
			total += n
		}
	}
	total = max(total, p.conns[scenario.Connflood], p.conns[scenario.Sourceflood]+p.neighbours)
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
	case scenario.Sourceflood:
		return o.edge.sourceFloodConns
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
	if hasScenario(o, scenario.Sourceflood) {
		d += o.barrier + attack.DefaultAnswerWait + o.floodHold // its dials, the neighbours' answers, the hold
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
		case scenario.Sourceflood:
			f.Limit = o.edge.maxConnsPerSource
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

// perOtherConn is the growth allowed per connection that reads what it
// gets (polite, splitter, garbage, connflood): its buffers and state and
// the runtime's around them. In-process it covers both ends of the
// connection and the client's goroutines: the default run's polite
// scenarios alone grow this process by 26-30 KiB per connection.
const perOtherConn = 32 << 10

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
		case scenario.Lookup(s).Alone:
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
	b.Other = max(other, p.conns[scenario.Connflood], p.conns[scenario.Sourceflood]+p.neighbours)
	return b
}

// anyHostile reports whether the run has a hostile scenario that applies.
func anyHostile(o *options) bool {
	for _, s := range o.scenarios {
		if scenario.Lookup(s).Hostile && notApplicable(o, s) == "" {
			return true
		}
	}
	return false
}
