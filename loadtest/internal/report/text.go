package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/hist"
)

// JSON writes r as indented JSON.
func JSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a result written by JSON.
func ReadJSON(rd io.Reader) (*Result, error) {
	var r Result
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("report: reading result: %w", err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("report: result format version %d, want %d", r.Version, Version)
	}
	if h := r.CloseDelay; h != nil {
		if err := h.Check(); err != nil {
			return nil, fmt.Errorf("report: reading result: %w", err)
		}
	}
	for _, s := range r.Scenarios { // maps and histograms may be absent in JSON
		n := NewScenario(s.Name)
		fill(&s.DialErrors, n.DialErrors)
		fill(&s.Errors, n.Errors)
		fill(&s.Ends, n.Ends)
		fill(&s.WrongReason, n.WrongReason)
		if s.RetxCount == nil {
			s.RetxCount = n.RetxCount
		}
		for _, h := range []**hist.Histogram{&s.Latency, &s.Connect, &s.ReapError, &s.ReapErrorAck, &s.AckDelay} {
			if *h == nil {
				*h = &hist.Histogram{}
			}
		}
	}
	return &r, nil
}

func fill(m *map[string]int, empty map[string]int) {
	if *m == nil {
		*m = empty
	}
}

// D formats nanoseconds compactly: 812µs, 12.3ms, 2.01s, -3.2ms.
func D(ns int64) string {
	d := time.Duration(ns)
	a := d.Abs()
	switch {
	case a < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case a < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case a < 100*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case a < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func counts[V int | int64](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// String describes the timeouts that are set, in one line.
func (t Timeouts) String() string {
	var parts []string
	if t.Idle > 0 {
		parts = append(parts, "idle "+t.Idle.String())
	}
	if t.KeepaliveTime > 0 {
		parts = append(parts, fmt.Sprintf("keepalive %s + %dx%s", t.KeepaliveTime, max(t.KeepaliveCount, 1), t.KeepaliveTimeout))
	}
	if t.Frame > 0 {
		parts = append(parts, "frame "+t.Frame.String())
	}
	if t.InitialRTO > 0 || t.MaxRetransmits > 0 {
		parts = append(parts, fmt.Sprintf("rto %s (min %s, max %s), %d retransmits, give up after %s", t.InitialRTO, t.MinRTO, t.MaxRTO, t.MaxRetransmits, t.GiveUpAfter))
	}
	return fmt.Sprintf("server timeouts: %s; tick %s, slack %s", strings.Join(parts, ", "), t.Tick, t.Slack)
}

// Verdict is a scenario's pass/fail checks: each failed check is a line.
func (s *Scenario) Verdict() []string {
	var bad []string
	if n := sum(s.DialErrors); n > 0 {
		bad = append(bad, fmt.Sprintf("%d connections failed to open (%s)", n, counts(s.DialErrors)))
	}
	if s.Lost > 0 {
		bad = append(bad, fmt.Sprintf("%d messages never answered", s.Lost))
	}
	if s.Early > 0 {
		bad = append(bad, fmt.Sprintf("%d connections closed EARLY", s.Early))
	}
	if s.NeverReaped > 0 {
		bad = append(bad, fmt.Sprintf("%d connections not closed within timeout + slack", s.NeverReaped))
	}
	if n := sum(s.WrongReason); n > 0 {
		bad = append(bad, fmt.Sprintf("%d closed for another reason (%s)", n, counts(s.WrongReason)))
	}
	if s.Survivors > s.Survived {
		bad = append(bad, fmt.Sprintf("%d of %d keepalive survivors were closed", s.Survivors-s.Survived, s.Survivors))
	}
	return bad
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func quantiles(h *hist.Histogram) string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s", D(h.Quantile(0.5)), D(h.Quantile(0.9)),
		D(h.Quantile(0.99)), D(h.Quantile(0.999)), D(h.Max()))
}

// Text writes the human-readable report.
func Text(w io.Writer, r *Result) {
	c := r.Config
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("netwheel load test: %s server (%s), %s protocol, %s", c.Server, c.Target, c.Proto, r.End.Sub(r.Start).Round(10*time.Millisecond))
	t := c.Timeouts
	p("  %s", t.String())
	if len(r.Shards) > 0 && !(len(r.Shards) == 1 && r.Shards[0] == "1/1") {
		p("  shards: %s", strings.Join(r.Shards, ", "))
	}
	// The server's own close delay goes under the idle scenario's close
	// errors, or after the scenarios if there is none.
	delayUnder := ""
	delayWhat := "timeout closes"
	if cd := r.CloseDelay; cd != nil {
		for _, s := range r.Scenarios {
			switch {
			case s.Name == "idle" && s.Expected > 0:
				delayUnder = s.Name
			case s.Expected > 0:
				delayWhat = "timeout closes of every scenario"
			}
		}
	}
	failed := 0
	for _, s := range r.Scenarios {
		p("")
		bad := s.Verdict()
		status := "ok"
		if len(bad) > 0 {
			status = "CHECK"
			failed++
		}
		p("[%s] %s: %d/%d connections opened, connect p99 %s", s.Name, status, s.Opened, s.Conns, D(s.Connect.Quantile(0.99)))
		if s.Latency.Count() > 0 {
			rate := ""
			if s.Elapsed > 0 {
				rate = fmt.Sprintf(", %.0f msgs/s", float64(s.Recv)/s.Elapsed.Seconds())
			}
			p("  messages: %d sent, %d echoed, %d lost%s", s.Sent, s.Recv, s.Lost, rate)
			p("  latency:  %s", quantiles(s.Latency))
		}
		if s.Expected > 0 {
			p("  %d expected to close by %q: %d on time, %d never (within slack), %d early, other reasons: %s",
				s.Expected, s.Expect, s.Reaped, s.NeverReaped, s.Early, counts(s.WrongReason))
			if s.ReapError.Count() > 0 {
				p("  close error (observed - expected): p50 %s  p99 %s  max %s  min %s", D(s.ReapError.Quantile(0.5)),
					D(s.ReapError.Quantile(0.99)), D(s.ReapError.Max()), D(s.ReapError.Min()))
			}
			if h := s.ReapErrorAck; h != nil && h.Count() > 0 {
				p("    (from the send: an upper bound of the reap lateness; from the answer below: a lower bound)")
				p("  close error from the server's answer: p50 %s  p99 %s  max %s  min %s (%d connections)",
					D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()), D(h.Min()), h.Count())
				p("  last message to answer: p50 %s  p99 %s  max %s", D(s.AckDelay.Quantile(0.5)), D(s.AckDelay.Quantile(0.99)), D(s.AckDelay.Max()))
			}
			if s.Name == delayUnder {
				p("  %s", closeDelayText(r.CloseDelay, delayWhat))
			}
		}
		if s.Survivors > 0 {
			p("  survivors: %d of %d stayed open; %d pings received in all", s.Survived, s.Survivors, s.Pings)
		}
		if len(s.Ladder) > 0 || len(s.RetxError) > 0 {
			var lad []string
			for _, d := range s.Ladder {
				lad = append(lad, D(int64(d)))
			}
			p("  expected ladder: %s, give up at %s", strings.Join(lad, " "), D(int64(s.GiveUpAt)))
			for k, h := range s.RetxError {
				p("  retransmission %d: %d seen, error p50 %s  p99 %s  max %s", k+1, h.Count(), D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()))
			}
			var rc []string
			for _, k := range slices.Sorted(maps.Keys(s.RetxCount)) {
				rc = append(rc, fmt.Sprintf("%d:%d", k, s.RetxCount[k]))
			}
			p("  connections by retransmissions seen: %s", strings.Join(rc, " "))
		}
		p("  ended: %s", counts(s.Ends))
		if len(s.Errors) > 0 {
			p("  errors: %s", counts(s.Errors))
		}
		for _, b := range bad {
			p("  ! %s", b)
		}
	}
	if r.CloseDelay != nil && delayUnder == "" {
		p("")
		p("%s", closeDelayText(r.CloseDelay, delayWhat))
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
	for _, l := range r.Limits {
		p("LIMIT: %s", l)
	}
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	p("")
	leaks := 0
	for _, l := range r.Limits {
		if strings.Contains(l, "LEAK") {
			leaks++
		}
	}
	switch {
	case failed == 0 && leaks == 0:
		p("all %d scenarios ok", len(r.Scenarios))
	case failed == 0:
		p("all %d scenarios ok, but the server may have leaked (LIMIT: LEAK? above)", len(r.Scenarios))
	default:
		p("%d of %d scenarios need a look (lines marked !)", failed, len(r.Scenarios))
	}
}

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
