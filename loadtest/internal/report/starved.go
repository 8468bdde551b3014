package report

import (
	"fmt"
	"time"
)

// Check is one failed check of a scenario: its line for the report and,
// for a check of timing, what lateness of the harness itself would
// explain the failure.
type Check struct {
	Kind CheckKind `json:"kind"`
	Line string    `json:"line"`
	// Tolerance is, for a check of timing, how long the check gave the
	// harness and the server (a slack, an answer wait); 0: no lateness of
	// the harness explains this failure.
	Tolerance time.Duration `json:"tolerance,omitempty"`
	// Need is how long in all the harness must have been kept waiting to
	// explain the failure.
	Need time.Duration `json:"need,omitempty"`
	// Local: only a server on the harness's machine, starved with it,
	// explains the failure (an early close).
	Local bool `json:"local,omitempty"`
}

// The rule by which the harness's own lag excuses a failed check of
// timing (SelfLag.Explains): other processes took at least a quarter of
// the machine's CPU (the lag came from the machine, not from the harness
// or an embedded server that burns the CPU, which a quiet machine must
// still fail); the harness was kept waiting at least a quarter of the run;
// its p99 lag reached a twentieth of the check's tolerance; it was kept
// waiting in all at least the check's Need; and an early close counts
// only when the server ran on the same machine (Check.Local). Shards on
// one machine count each other as other processes. On 2 CPUs, two
// spinners at nice -15 keep a run waiting 92-99% of it, other processes
// taking 94-99%; other work at the same priority, 4-40% and up to 67%.
const (
	starvedOthers   = 0.25
	starvedShare    = 0.25
	lagPerTolerance = 20
)

// Starved reports whether the harness was starved over the run (the rule
// above); without the CPU figures (no /proc) it never is.
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
