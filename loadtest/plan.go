package main

import (
	"fmt"
	"math"
	"net"
	"slices"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
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
	// churnOpen is the allowance of churn connections open at once (0:
	// no churn).
	churnOpen int
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
	p := plan{conns: map[string]int{}, churn: o.ChurnRate / float64(o.shard.N)}
	total := 0
	for _, s := range o.Scenarios {
		if s == scenario.Churn || scenario.Lookup(s).Alone {
			continue
		}
		p.conns[s] = o.shard.Share(requested(o, s))
		total += p.conns[s]
	}
	if slices.Contains(o.Scenarios, scenario.Churn) {
		p.churnOpen = churnConns(p.churn) // churn conns live ~ tens of ms; a generous allowance
	}
	total += p.churnOpen
	perConn, reserve := 1, 100
	if o.Addr == "" {
		perConn = 2 // the server's end is in this process too
	}
	budget := (int(min(fdLimit, math.MaxInt32)) - reserve) / perConn
	way := "drive a server in another process with -addr, or split the test with -shard i/n over several processes"
	if o.Addr != "" {
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
	for _, s := range o.Scenarios {
		if !scenario.Lookup(s).Alone || notApplicable(o, s) != "" {
			continue
		}
		// It runs alone, after the others: its own budget, the flood
		// first (sourceflood's neighbours, -conns other sources, after).
		n, m := o.shard.Share(requested(o, s)), 0
		if s == scenario.Sourceflood {
			m = o.shard.Share(o.conns)
		}
		if n+m > budget {
			p.limits = append(p.limits, fmt.Sprintf("file descriptors: %d open files allowed per process (%d per connection here); %s opened %d of the %d connections requested, maybe not beyond the server's limit; %s",
				fdLimit, perConn, s, budget, n+m, way))
			n = min(n, budget)
			m = budget - n
		}
		p.conns[s] = n
		if s == scenario.Sourceflood {
			p.neighbours = m
		}
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
	if n := o.hostileConns[s]; n != nil {
		return *n
	}
	return o.conns
}

// hardBound is the longest a run may take: the duration plus the longest
// timer under test, the slack and a margin. The attack stops by itself
// well before; this only bounds a broken server.
func hardBound(o *options) time.Duration {
	t := o.Timeouts
	_, giveUp, _ := attack.Ladder(t)
	longest := max(t.Idle, t.DeadPeerAfter(), t.Frame, t.Handshake, giveUp)
	d := o.Duration + o.BarrierTimeout + o.IdleSpread + longest + t.Slack + o.CloseHorizon + 20*time.Second
	if slices.Contains(o.Scenarios, scenario.Connflood) {
		d += o.BarrierTimeout + o.FloodHold // after the others: its dials, then the hold
	}
	if slices.Contains(o.Scenarios, scenario.Sourceflood) {
		d += o.BarrierTimeout + attack.DefaultAnswerWait + o.FloodHold // its dials, the neighbours' answers, the hold
	}
	return d
}

// churnConns is the allowance of churn connections open at once at rate
// connections a second: each lives tens of milliseconds.
func churnConns(rate float64) int { return int(math.Ceil(rate/5)) + 16 }
