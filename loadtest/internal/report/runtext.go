package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// runText writes the figures of the run beyond its scenarios, its limits
// and notes, and the verdict's last line.
func runText(p func(string, ...any), r *Result, j *Judgement) {
	if m := r.Memory; m != nil {
		memoryText(p, m, j.Memory)
	}
	if sv := r.Server; sv != nil {
		p("")
		p("server (%s): %d accepted, peak %d open, %d open at the end, %d timers pending at the end", sv.Kind, sv.Accepted, sv.PeakOpen, sv.Open, sv.TimersPending)
		p("  expiries %d, probes %d, retransmits %d, give-ups %d; closes: %s", sv.Expiries, sv.Probes, sv.Retransmits, sv.GiveUps, counts(sv.Closes))
	}
	if pr := r.Process; pr != nil {
		who, per := "client and embedded server together", "both ends and the runtime included"
		if r.Config.Server == "external" {
			who, per = "the harness's clients only", "the client side, runtime included"
		}
		p("process: cpu %s, peak RSS %.1f MiB (%s), peak client conns %d",
			pr.CPU.Round(10*time.Millisecond), float64(pr.PeakRSSBytes)/(1<<20), who, pr.PeakConns)
		if pr.PeakConns > 0 {
			p("  at most %.1f KiB of RSS per connection, %s (for the server alone, run it apart: docs/perf.md)",
				float64(pr.PeakRSSBytes)/1024/float64(pr.PeakConns), per)
		}
		p("  goroutines %d -> %d, open files %d -> %d (before -> after)", pr.Goroutines[0], pr.Goroutines[1], pr.FDs[0], pr.FDs[1])
	}
	if rm := r.Remote; rm != nil {
		remoteText(p, rm)
	}
	if sl := r.SelfLag; sl != nil {
		selfLagText(p, sl)
	}
	for _, l := range r.Leaks {
		p("LEAK: %s", l)
	}
	for _, l := range r.Limits {
		p("LIMIT: %s", l)
	}
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	p("")
	p("%s", lastLine(j, r.Memory != nil))
}

// lastLine is the verdict in one line: the scenarios judged and how, the
// memory, the leaks, and those not judged.
func lastLine(j *Judgement, memory bool) string {
	var failed, notJudged, nothing []string
	for _, v := range j.Scenarios {
		switch v.Status {
		case StatusFailed:
			failed = append(failed, v.Scenario)
		case StatusNotJudged:
			notJudged = append(notJudged, v.Scenario)
		case StatusNothingToJudge:
			nothing = append(nothing, v.Scenario)
		}
	}
	var line string
	switch {
	case len(failed) > 0:
		line = fmt.Sprintf("%d of %d scenarios need a look (%s: lines marked !)", len(failed), j.Judged, strings.Join(failed, ", "))
	case j.Judged == 0:
		line = "no scenario judged"
	case j.Judged == 1:
		line = "the 1 scenario judged is ok"
	default:
		line = fmt.Sprintf("all %d scenarios judged are ok", j.Judged)
	}
	switch {
	case len(j.Memory) > 0:
		line += "; the server's memory grew beyond its bound (! under [memory])"
	case j.MemoryUnjudged != "":
		line += "; the server's memory not judged (see [memory])"
	case memory:
		line += "; the server's memory within its bound"
	}
	if len(j.Leaks) > 0 {
		line += "; the server leaked (LEAK above)"
	}
	if len(nothing) > 0 {
		line += fmt.Sprintf("; nothing to judge in %s", strings.Join(nothing, ", "))
	}
	if len(notJudged) > 0 {
		// Not judged is no failure, and no pass either: the exit status
		// is 3 unless something failed.
		line += fmt.Sprintf("; %d not judged (%s): %s (lines marked ~)", len(notJudged), strings.Join(notJudged, ", "), j.Starved)
	}
	return line
}

// memoryText writes the server's memory figures and their bound.
func memoryText(p func(string, ...any), m *Memory, bad []Check) {
	p("")
	b := m.Bound
	status := "ok"
	if len(bad) > 0 {
		status = "CHECK"
	}
	whose := "server RSS"
	if m.InProcess {
		whose = "RSS of this process (server embedded: the client's memory is included)"
	}
	if why := m.Unjudged(); why != "" {
		p("[memory] not judged: %s", why)
	} else {
		p("[memory] %s: %s %s before, peak %s (%+.1f MiB), %s at the end; %d samples from %s",
			status, whose, scenario.MiB(m.Before), scenario.MiB(m.Peak), float64(m.Growth())/(1<<20), scenario.MiB(m.End), m.Samples, m.Source)
	}
	var filling []string
	for _, k := range slices.Sorted(maps.Keys(b.Filling)) {
		filling = append(filling, fmt.Sprintf("%s %d", k, b.Filling[k]))
	}
	per := scenario.MiB(b.OutputLimit) + " output"
	if b.UnackedLimit > 0 {
		per = fmt.Sprintf("(%s output + %s unacked)", scenario.MiB(b.OutputLimit), scenario.MiB(b.UnackedLimit))
	}
	p("  bound: +%s = %s x %d connections that may not read (%s) + %.0f KiB x %d other connections + %s",
		scenario.MiB(b.Total()), per, b.FillingConns(), strings.Join(filling, ", "), float64(b.PerOther)/1024, b.Other, scenario.MiB(b.Fixed))
	if m.Stopped {
		p("  the floods stopped when the growth passed the bound: the verdict was in")
	}
	for _, l := range bad {
		p("  ! %s", l.Line)
	}
}

// selfLagText writes how promptly the harness got the CPU.
func selfLagText(p func(string, ...any), sl *SelfLag) {
	p("harness lag (a 1 ms wake, its wait behind the harness's goroutines included): p50 %s  p99 %s  max %s; kept waiting %s of %s (%.0f%%)",
		D(sl.Lag.Quantile(0.5)), D(sl.Lag.Quantile(0.99)), D(sl.Lag.Max()), D(int64(sl.Stalled)), D(int64(sl.Wall)), 100*sl.StalledShare())
	if sl.Err != "" {
		p("  other processes' CPU: not read: %s", sl.Err)
		return
	}
	server := ""
	if sl.ServerCPU > 0 {
		server = ", the server (-server-pid) " + cpuS(sl.ServerCPU)
	}
	p("  CPU over the run: this process %s%s, other processes %s, stolen by the hypervisor %s, of %s (%d CPUs)",
		cpuS(sl.OwnCPU), server, cpuS(sl.OtherCPU), cpuS(sl.StealCPU), cpuS(sl.Capacity()), sl.CPUs)
}

// cpuS formats CPU time in CPU-seconds.
func cpuS(d time.Duration) string { return fmt.Sprintf("%.1f CPU-s", d.Seconds()) }

// remoteText writes the external server's leak check.
func remoteText(p func(string, ...any), rm *Remote) {
	p("")
	if rm.Err != "" {
		p("server metrics (%s): no reading after the run: %s", rm.URL, rm.Err)
		return
	}
	verdict := "no leak"
	if n := len(rm.Leaks()); n > 0 {
		verdict = fmt.Sprintf("%d LEAK? (lines marked !)", n)
	}
	p("server metrics (%s), read %s after the run: %s", rm.URL, rm.Settled.Round(time.Millisecond), verdict)
	for _, m := range rm.Metrics {
		switch {
		case m.Missing:
			p("  %-18s not exposed by the server: not checked", m.Label)
		default:
			mark, tol := " ", ""
			if m.Leak {
				mark = "!"
			}
			if m.Tolerance > 0 {
				tol = fmt.Sprintf(" (up to +%g allowed)", m.Tolerance)
			}
			p(" %s%-18s %g -> %g%s", mark, m.Label, m.Before, m.After, tol)
		}
	}
}

// NotEchoNote returns a hint when an external raw server taken for an echo
// server (no -payload, -expect or -preset) answered none of the messages
// its polite scenarios sent: it may speak another protocol.
func (r *Result) NotEchoNote() string {
	if c := r.Config; c.Server != "external" || c.Proto != "raw" || c.Payload != "" || c.Expect != "" {
		return ""
	}
	var sent, recv uint64
	for _, f := range r.Scenarios {
		if !f.Hostile { // a hostile peer may not read what is echoed (nonreader)
			sent, recv = sent+f.Sent, recv+f.Recv
		}
	}
	if sent > 0 && recv == 0 {
		return "no message was echoed: if the server speaks another protocol, say what to send and what it answers with -preset (redis, memcached, http, line) or -payload and -expect"
	}
	return ""
}

// DialLimits returns a limit for each scenario whose connections hit the
// open-file limit or ran out of ephemeral ports, with the way around it.
func (r *Result) DialLimits() []string {
	var limits []string
	for _, f := range r.Scenarios {
		if n := f.DialErrors["fd_limit"]; n > 0 {
			limits = append(limits, fmt.Sprintf("%s: %d connections hit the open-file limit; use -addr with the server in another process, or -shard", f.Name, n))
		}
		if n := f.DialErrors["ephemeral_ports"]; n > 0 {
			limits = append(limits, fmt.Sprintf("%s: %d connections ran out of ephemeral ports; use -shard over several hosts", f.Name, n))
		}
	}
	return limits
}
