package main

import (
	"math"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// This file derives the growth a server whose per-connection limits hold
// is allowed while hostile scenarios run (package observe samples it).

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

// anyHostile reports whether the run has a hostile scenario that applies.
func anyHostile(o *options) bool {
	for _, s := range o.scenarios {
		if scenario.Lookup(s).Hostile && notApplicable(o, s) == "" {
			return true
		}
	}
	return false
}
