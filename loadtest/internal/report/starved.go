package report

import (
	"fmt"
	"time"
)

// This file holds the rule by which the harness's own starvation excuses
// a failed check of timing.

// Check is one failed check of a scenario: its line for the report and,
// for a check of timing, what lateness of the harness itself would
// explain the failure.
type Check struct {
	Kind CheckKind `json:"kind"`
	Line string    `json:"line"`
	// Tolerance is, for a check of timing, how long the check gave the
	// harness and the server: the slack of a close, the wait for an
	// answer, the keepalive timeout a ping must be answered within. 0: no
	// lateness of the harness explains this failure (a wrong echo, an early
	// close, a connection held beyond a limit).
	Tolerance time.Duration `json:"tolerance,omitempty"`
	// Need is how long in all the harness must have been kept waiting to
	// explain the failure: how far the latest close overran the slack, the
	// horizon of a close never seen, else the tolerance.
	Need time.Duration `json:"need,omitempty"`
	// Local says only a server on the harness's machine, starved with
	// it, can explain the failure (an early close): a server elsewhere
	// is not slowed by this machine's load.
	Local bool `json:"local,omitempty"`
}

// The rule by which the harness's own lag excuses a failed check of
// timing (SelfLag.Explains). Each part has its reason:
//   - other processes (and the hypervisor) took at least a quarter of the
//     machine's CPU over the run (starvedOthers): the lag came from the
//     machine, not from the harness's own work or an embedded server that
//     burns the CPU, which a quiet machine must still fail;
//   - the harness was kept waiting at least a quarter of the run
//     (starvedShare): a starved run, not a few hiccups;
//   - its p99 lag reached a twentieth of the check's tolerance
//     (lagPerTolerance): the stalls were large against what the check
//     allowed, not a millisecond each;
//   - it was kept waiting in all at least the check's Need: lateness
//     beyond what the harness lost cannot be the harness's;
//   - an early close (Check.Local) only when the server ran on the same
//     machine: the harness's lateness makes a close look later, never
//     earlier, but a server starved with it may expire a timer before it
//     reads the bytes that were to reset it.
//
// Shards run on one machine count each other among its other processes:
// give each shard a machine of its own, or read a starved verdict of such
// a run as the harness's own load.
//
// Measured on 2026-11-27 on 2 CPUs (the docs/perf.md machine): two
// processes spinning at nice -15 beside `go run ./loadtest` give a lag
// p99 of 385 ms to 5.9 s, kept waiting 92-99% of the run, other processes
// 94-99% of the CPU; without them, beside other work at the same
// priority, a p99 of 5-12 ms, waiting 4-18%; beside other builds and
// tests at the same priority (load 2-8), runs that were late by up to
// 833 ms were kept waiting 35-40% with other processes at 43-67%.
const (
	starvedOthers   = 0.25
	starvedShare    = 0.25
	lagPerTolerance = 20
)

// Starved reports whether the harness was starved over the run: other
// processes took at least a quarter of the machine's CPU and the harness
// was kept waiting at least a quarter of the time. Without the CPU figures (no /proc) it
// is never starved: nothing tells the machine's load from the harness's.
func (l *SelfLag) Starved() bool {
	if l == nil || l.Err != "" || l.Lag == nil || l.Wall <= 0 || l.CPUs <= 0 {
		return false
	}
	others := l.OtherCPU + l.StealCPU
	return float64(others) >= starvedOthers*float64(l.Capacity()) && l.StalledShare() >= starvedShare
}

// Explains reports whether the harness's starvation explains the failed
// check c (see the rule above starvedOthers): then c is not judged rather
// than failed.
func (l *SelfLag) Explains(c Check) bool {
	if c.Tolerance <= 0 || !l.Starved() {
		return false
	}
	return l.Lag.Quantile(0.99)*lagPerTolerance >= int64(c.Tolerance) && l.Stalled >= c.Need
}

// Why says in one line why a check was not judged.
func (l *SelfLag) Why() string {
	return fmt.Sprintf("the load generator was starved (lag p99 %s, kept waiting %s of %s, other processes %s of %s)",
		D(l.Lag.Quantile(0.99)), D(int64(l.Stalled)), D(int64(l.Wall)), cpuS(l.OtherCPU+l.StealCPU), cpuS(l.Capacity()))
}
