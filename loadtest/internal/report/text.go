package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
)

// JSON writes r as indented JSON, with its judgement (Result.Judgement)
// computed afresh; r is not modified.
func JSON(w io.Writer, r *Result) error {
	out := *r
	out.Judgement = r.judge()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&out)
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
	r.Judgement = nil // the figures say it again
	if l := r.SelfLag; l != nil && l.Lag == nil {
		l.Lag = &hist.Histogram{}
	}
	for _, s := range r.Scenarios { // maps and histograms may be absent in JSON
		if s.Proto == "" {
			s.Proto = r.Config.Proto // written before scenarios had their own
		}
		n := NewScenario(s.Name)
		fill(&s.DialErrors, n.DialErrors)
		fill(&s.Errors, n.Errors)
		fill(&s.Ends, n.Ends)
		fill(&s.WrongReason, n.WrongReason)
		if s.RetxCount == nil {
			s.RetxCount = n.RetxCount
		}
		for _, h := range []**hist.Histogram{&s.Latency, &s.Connect, &s.ReapError, &s.ReapErrorAck, &s.AckDelay, &s.ReapErrorWire, &s.CloseAfter} {
			if *h == nil {
				*h = &hist.Histogram{}
			}
		}
		for _, ro := range s.Roles {
			if ro.Ends == nil {
				ro.Ends = map[string]int{}
			}
			if ro.CloseAfter == nil {
				ro.CloseAfter = &hist.Histogram{}
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
	if len(parts) == 0 {
		parts = append(parts, "none given")
	}
	tick := ""
	if t.Tick > 0 {
		tick = fmt.Sprintf("tick %s, ", t.Tick)
	}
	return fmt.Sprintf("server timeouts: %s; %sslack %s", strings.Join(parts, ", "), tick, t.Slack)
}

// Verdict is a scenario's pass/fail checks: each failed check is a line
// (Checks, without what the harness's lag may explain).
func (s *Scenario) Verdict() []string {
	var lines []string
	for _, c := range s.Checks(Timeouts{}) {
		lines = append(lines, c.Line)
	}
	return lines
}

// Checks returns the scenario's failed checks, in report order; t is the
// server's timeouts the run expected, which say how long a check of timing
// gave the harness and the server (Check.Tolerance).
func (s *Scenario) Checks(t Timeouts) []Check {
	var bad []Check
	hard := func(format string, a ...any) { bad = append(bad, Check{Line: fmt.Sprintf(format, a...)}) }
	timing := func(tol, need time.Duration, format string, a ...any) {
		bad = append(bad, Check{Line: fmt.Sprintf(format, a...), Tolerance: tol, Need: max(need, tol)})
	}
	dialErrs := maps.Clone(s.DialErrors)
	if s.Name == "connflood" {
		// A server may refuse a flood at the door; only the client's own
		// limits spoil the test.
		dialErrs = map[string]int{"fd_limit": s.DialErrors["fd_limit"], "ephemeral_ports": s.DialErrors["ephemeral_ports"]}
		maps.DeleteFunc(dialErrs, func(_ string, v int) bool { return v == 0 })
	}
	if n := dialErrs["timeout"]; n > 0 && s.DialWait > 0 {
		timing(s.DialWait, 0, "%d connections not opened within %s (dial timeout)", n, D(int64(s.DialWait)))
		delete(dialErrs, "timeout")
	}
	if n := sum(dialErrs); n > 0 {
		hard("%d connections failed to open (%s)", n, counts(dialErrs))
	}
	if s.Mismatch > 0 {
		hard("%d echoes differed from what was sent", s.Mismatch)
	}
	if s.Limit > 0 && s.Held() > s.Limit {
		hard("the server held %d connections open, above its limit of %d", s.Held(), s.Limit)
	}
	// Over raw a refusal and an idle close are both EOF: only a framed
	// server's CLOSE frames tell how many it refused.
	if n := s.Ends["overload"]; s.Limit > 0 && s.Proto != "raw" && n > max(s.Opened-s.Limit, 0) {
		hard("the server refused %d connections as overload, more than the %d beyond its limit of %d (%d opened)",
			n, max(s.Opened-s.Limit, 0), s.Limit, s.Opened)
	}
	if s.Lost > 0 {
		timing(s.AnswerWait, 0, "%d messages never answered (within %s)", s.Lost, D(int64(s.AnswerWait)))
	}
	// A peer's answer to a ping that came too late is the harness's
	// lateness, whatever the connection expected.
	answer := t.KeepaliveTimeout
	if n := s.Early - s.EarlyDeadPeer; n > 0 {
		// The harness's lateness makes a close look later, never earlier;
		// a server starved on the same machine may expire a timer before
		// it reads the bytes that were to reset it.
		early := -time.Duration(s.ReapError.Min())
		bad = append(bad, Check{Line: fmt.Sprintf("%d of %d closed EARLY, by up to %s", n, s.Expected, D(int64(early))),
			Tolerance: max(t.Tick, time.Millisecond), Need: early, Local: true})
	}
	if s.EarlyDeadPeer > 0 {
		timing(answer, 0, "%d of %d closed as dead peers before their deadline: the harness did not answer the server's pings within %s",
			s.EarlyDeadPeer, s.Expected, D(int64(answer)))
	}
	if s.Late > 0 {
		timing(t.Slack, time.Duration(s.ReapError.Max())-t.Slack, "%d of %d closed late, beyond the slack: %s", s.Late, s.Expected, lateness(s.ReapError))
	}
	if s.NeverReaped > 0 {
		timing(t.Slack, s.Horizon, "%d of %d not closed within %s of their deadline", s.NeverReaped, s.Expected, s.horizonText())
	}
	wrong := maps.Clone(s.WrongReason)
	if n := wrong["dead_peer"] - s.EarlyDeadPeer; n > 0 && s.Expect != "dead_peer" {
		timing(answer, 0, "%d closed as dead peers (the harness did not answer the server's pings within %s)", n, D(int64(answer)))
	}
	delete(wrong, "dead_peer")
	if n := sum(wrong); n > 0 {
		hard("%d closed for another reason (%s)", n, counts(wrong))
	}
	if s.Survivors > s.Survived {
		// A survivor is closed when it answers, sends or finishes a frame
		// too late, or when the server is wrong.
		timing(shortest(t.KeepaliveTimeout, t.Frame, t.Idle), 0, "%d of %d %s survivors were closed", s.Survivors-s.Survived, s.Survivors, s.Name)
	}
	return append(bad, s.mustCloseChecks(answer)...)
}

// shortest returns the shortest positive duration of ds, or 0.
func shortest(ds ...time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return m
}

// lateness describes the close errors of h, in ns: how late the closes
// came.
func lateness(h *hist.Histogram) string {
	return fmt.Sprintf("late p50 %s, p99 %s, max %s", D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()))
}

// horizonText says how long after its deadline a close was waited for.
func (s *Scenario) horizonText() string {
	if s.Horizon <= 0 {
		return "the slack" // results written before the horizon
	}
	return D(int64(s.Horizon)) + " (the horizon)"
}

// mustClose is, for each hostile scenario whose every connection the
// server must close, what the connections are called in a verdict, why the
// server must close them, and the close reasons a framed server's CLOSE
// frame may give (none: any close counts, the reason is not checked, as
// for a non-reader, which a CLOSE frame would reach only behind the output
// it does not read).
var mustClose = map[string]struct {
	what, why string
	reasons   []string
}{
	"nonreader": {what: "non-readers", why: "a peer that does not read must be closed by an output limit"},
	"pingflood": {what: "ping flooders", why: "PINGs beyond the ping rate limit must close the connection", reasons: []string{"ping_flood"}},
	// Random bytes may, rarely (about 1 in 65 000), start a valid frame,
	// which a server then closes when its frame deadline passes.
	"garbage": {what: "garbage connections", why: "bytes that are no frame must close the connection", reasons: []string{"frame_too_large", "protocol_error", "frame_deadline"}},
}

// mustCloseChecks is the failed checks of a scenario whose every
// connection the server must close (mustClose), unless NotApplicable: a
// connection the server did not close, a close later than CloseWithin
// after the misbehaviour began, and, framed, a close that did not say one
// of the scenario's reasons. A close not seen within the window is a check
// of timing (the harness may not have flooded, or the server read, in
// time); what was sent whole and kept, or held when the memory passed its
// bound, is not.
//
// answer is how long the server gives a peer to answer its ping: a close
// as a dead peer is the harness's lateness.
func (s *Scenario) mustCloseChecks(answer time.Duration) []Check {
	mc, ok := mustClose[s.Name]
	if !ok || s.NotApplicable() != "" {
		return nil
	}
	var bad []Check
	hard := func(format string, a ...any) { bad = append(bad, Check{Line: fmt.Sprintf(format, a...)}) }
	// A starved harness floods slowly, and a server starved with it reads
	// slowly: the close may not come within the window, of which at least
	// garbageWait was given.
	within := max(s.CloseWithin, garbageWait)
	switch {
	case s.FloodBytes > 0: // nonreader: only a connection that sent its whole flood must be closed
		if s.FloodedOpen > 0 {
			hard("%d of %d %s sent their whole flood (%s) and were not closed by the server (%s)",
				s.FloodedOpen, s.Opened, mc.what, MiB(s.FloodBytes), mc.why)
		}
		if s.FloodStoppedOpen > 0 {
			hard("%d of %d %s were still open when the server's memory passed its bound (%s)",
				s.FloodStoppedOpen, s.Opened, mc.what, mc.why)
		}
	case s.Opened > s.ServerClosed:
		bad = append(bad, Check{Line: fmt.Sprintf("%d of %d %s were not closed by the server (%s)", s.Opened-s.ServerClosed, s.Opened, mc.what, mc.why),
			Tolerance: garbageWait, Need: within})
	}
	if s.CloseWithin > 0 && s.CloseAfter != nil && s.CloseAfter.Max() > int64(s.CloseWithin) {
		bad = append(bad, Check{Line: fmt.Sprintf("the server closed %s as late as %s after their misbehaviour began, beyond the %s bound (the sending window)",
			mc.what, D(s.CloseAfter.Max()), D(int64(s.CloseWithin))),
			Tolerance: garbageWait, Need: time.Duration(s.CloseAfter.Max()) - s.CloseWithin})
	}
	if len(mc.reasons) > 0 && s.Proto != "raw" {
		other := maps.Clone(s.Ends)
		maps.DeleteFunc(other, func(k string, _ int) bool { return k == EndClient || slices.Contains(mc.reasons, k) })
		if n := other["dead_peer"]; n > 0 && answer > 0 {
			bad = append(bad, Check{Line: fmt.Sprintf("%d %s closed as dead peers (the harness did not answer the server's pings within %s)", n, mc.what, D(int64(answer))),
				Tolerance: answer, Need: answer})
			delete(other, "dead_peer")
		}
		if n := sum(other); n > 0 {
			hard("%d %s ended without a CLOSE frame saying %s (%s)", n, mc.what, strings.Join(mc.reasons, " or "), counts(other))
		}
	}
	return bad
}

// garbageWait is the least time a hostile connection waits for the
// server's close (attack's garbageWaitMin).
const garbageWait = time.Second

// NotApplicable returns why the scenario's own check does not apply to the
// run, or "" if it does: garbage over the raw protocol, where any bytes
// are a valid stream for the server to echo, and nothing is to be closed.
// The checks every scenario has (dial errors, mismatched echoes) still
// apply.
func (s *Scenario) NotApplicable() string {
	switch {
	case s.Unjudged != "":
		return s.Unjudged
	case s.FloodBytes > 0 && s.Opened > 0 && s.FloodCut == s.Opened && s.FloodStoppedOpen == 0:
		return fmt.Sprintf("no connection sent its whole flood (%s) or was closed within the window (-duration): "+
			"the window ended first, or the server stopped reading from them, so there is nothing to judge", MiB(s.FloodBytes))
	case s.Name == "garbage" && s.Proto == "raw":
		return "raw protocol: any bytes are a valid stream to echo, so there is nothing to close the connection for"
	}
	return ""
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
	if c.Known != nil {
		t = *c.Known // an external server: only what the flags said
	}
	p("  %s", t.String())
	if c.Payload != "" || c.Expect != "" {
		p("  each message %s; an answer: %s", c.Payload, c.Expect)
	}
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
	var notApplicable, notJudged []string
	for _, s := range r.Scenarios {
		p("")
		bad, nj := r.Judge(s)
		na := s.NotApplicable()
		status := "ok"
		switch {
		case len(bad) > 0:
			status = "CHECK"
			failed++
		case len(nj) > 0:
			status = "not judged"
			notJudged = append(notJudged, s.Name)
		case na != "":
			status = "not applicable"
			notApplicable = append(notApplicable, s.Name)
		}
		p("[%s] %s: %d/%d connections opened, connect p99 %s", s.Name, status, s.Opened, s.Conns, D(s.Connect.Quantile(0.99)))
		if na != "" {
			p("  not applicable: %s", na)
		}
		if s.Latency.Count() > 0 {
			rate := ""
			if s.Elapsed > 0 {
				rate = fmt.Sprintf(", %.0f msgs/s", float64(s.Recv)/s.Elapsed.Seconds())
			}
			p("  messages: %d sent, %d echoed, %d lost%s", s.Sent, s.Recv, s.Lost, rate)
			p("  latency:  %s", quantiles(s.Latency))
		}
		if s.Expected > 0 {
			p("  %d expected to close by %q: %d on time, %d late (beyond the slack), %d never (not closed within %s), %d early, other reasons: %s",
				s.Expected, s.Expect, s.Reaped, s.Late, s.NeverReaped, s.horizonText(), s.Early, counts(s.WrongReason))
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
			if h := s.ReapErrorWire; h != nil && h.Count() > 0 {
				p("  close error on the wire (the server's FIN, kernel timestamp - expected): p50 %s  p99 %s  max %s  min %s (%d connections)",
					D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()), D(h.Min()), h.Count())
			}
			if s.Name == delayUnder {
				p("  %s", closeDelayText(r.CloseDelay, delayWhat))
			}
		}
		if s.Survivors > 0 {
			p("  survivors: %d of %d stayed open; %d pings received in all", s.Survived, s.Survivors, s.Pings)
		}
		if s.Hostile {
			hostileText(p, s)
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
			p("  ! %s", b.Line)
		}
		if len(nj) > 0 {
			p("  not judged: %s:", r.SelfLag.Why())
		}
		for _, c := range nj {
			p("  ~ %s", c.Line)
		}
	}
	if r.CloseDelay != nil && delayUnder == "" {
		p("")
		p("%s", closeDelayText(r.CloseDelay, delayWhat))
	}
	memBad := r.Memory.Verdict()
	if m := r.Memory; m != nil {
		memoryText(p, m, memBad)
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
	// The memory is judged only with figures; without them the last line
	// says so instead of "within its bound", and it is no failure: the
	// scenarios' own checks still stand.
	mem := ""
	switch {
	case len(memBad) > 0:
		mem = ", and the server's memory grew beyond its bound"
	case r.Memory.Unjudged() != "":
		mem = ", the server's memory not judged (see [memory])"
	case r.Memory != nil:
		mem = ", the server's memory within its bound"
	}
	all := fmt.Sprintf("all %d scenarios ok", len(r.Scenarios))
	if len(notApplicable) > 0 {
		all = fmt.Sprintf("all %d judged scenarios ok, %d not applicable (%s)", len(r.Scenarios)-len(notApplicable)-len(notJudged), len(notApplicable), strings.Join(notApplicable, ", "))
	}
	njWhy := ""
	if len(notJudged) > 0 {
		// Not judged is no failure, and no pass either: the exit status
		// is 3 unless something failed.
		switch judged := len(r.Scenarios) - len(notJudged) - len(notApplicable); {
		case judged == 0 && len(notApplicable) > 0:
			all = fmt.Sprintf("no scenario judged, %d not applicable (%s)", len(notApplicable), strings.Join(notApplicable, ", "))
		case judged == 0:
			all = "no scenario judged"
		case len(notApplicable) == 0:
			all = fmt.Sprintf("all %d judged scenarios ok", judged)
		}
		njWhy = fmt.Sprintf("; %d not judged (%s): %s (lines marked ~)", len(notJudged), strings.Join(notJudged, ", "), r.SelfLag.Why())
	}
	switch {
	case failed == 0 && len(memBad) > 0:
		p("%s, but the server's memory grew beyond its bound (line marked ! under [memory])%s", all, njWhy)
	case failed == 0 && leaks == 0:
		p("%s%s%s", all, mem, njWhy)
	case failed == 0:
		p("%s%s, but the server may have leaked (LIMIT: LEAK? above)%s", all, mem, njWhy)
	default:
		p("%d of %d scenarios need a look (lines marked !)%s%s", failed, len(r.Scenarios), mem, njWhy)
	}
}

// hostileText writes what the server did with a hostile scenario's
// connections.
func hostileText(p func(string, ...any), s *Scenario) {
	switch s.Name {
	case "nonreader":
		p("  sent %s (%d messages) in %d writes, reading nothing", MiB(int64(s.Bytes)), s.Sent, s.Writes)
	case "pingflood":
		p("  sent %d pings (%s) in %d writes; %d pongs read", s.Sent, MiB(int64(s.Bytes)), s.Writes, s.Recv)
	case "splitter":
		per := 0.0
		if s.Writes > 0 {
			per = float64(s.Bytes) / float64(s.Writes)
		}
		p("  %d bytes in %d writes (%.1f bytes a write); %d echoes differed from what was sent", s.Bytes, s.Writes, per, s.Mismatch)
	case "connflood":
		limit := "no limit told (-max-conns)"
		if s.Limit > 0 {
			limit = fmt.Sprintf("limit %d", s.Limit)
		}
		p("  %s: %d held open to the end, %d closed by the server, %d refused at dial (%s)",
			limit, s.Held(), s.ServerClosed, sum(s.DialErrors), counts(s.DialErrors))
	}
	closed := fmt.Sprintf("  closed by the server: %d of %d", s.ServerClosed, s.Opened)
	if h := s.CloseAfter; h != nil && h.Count() > 0 {
		from := "the misbehaviour began"
		if s.Name == "connflood" {
			from = "the connect"
		}
		closed += fmt.Sprintf(", after %s: p50 %s  p99 %s  max %s", from, D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()))
	}
	p("%s", closed)
	if len(s.Roles) > 1 {
		for _, name := range slices.Sorted(maps.Keys(s.Roles)) {
			ro := s.Roles[name]
			line := fmt.Sprintf("    %s: %d of %d closed", name, ro.ServerClosed, ro.Opened)
			if ro.CloseAfter != nil && ro.CloseAfter.Count() > 0 {
				line += fmt.Sprintf(" (p50 %s, max %s)", D(ro.CloseAfter.Quantile(0.5)), D(ro.CloseAfter.Max()))
			}
			p("%s; ended: %s", line, counts(ro.Ends))
		}
	}
}

// memoryText writes the server's memory figures and their bound.
func memoryText(p func(string, ...any), m *Memory, bad []string) {
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
			status, whose, MiB(m.Before), MiB(m.Peak), float64(m.Growth())/(1<<20), MiB(m.End), m.Samples, m.Source)
	}
	var filling []string
	for _, k := range slices.Sorted(maps.Keys(b.Filling)) {
		filling = append(filling, fmt.Sprintf("%s %d", k, b.Filling[k]))
	}
	per := MiB(b.OutputLimit) + " output"
	if b.UnackedLimit > 0 {
		per = fmt.Sprintf("(%s output + %s unacked)", MiB(b.OutputLimit), MiB(b.UnackedLimit))
	}
	p("  bound: +%s = %s x %d connections that may not read (%s) + %.0f KiB x %d other connections + %s",
		MiB(b.Total()), per, b.FillingConns(), strings.Join(filling, ", "), float64(b.PerOther)/1024, b.Other, MiB(b.Fixed))
	if m.Stopped {
		p("  the floods stopped when the growth passed the bound: the verdict was in")
	}
	for _, l := range bad {
		p("  ! %s", l)
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

// Failures returns how many of the result's judgements failed: scenarios
// with a failed check the harness's starvation does not explain (Judge),
// the memory bound, a suspected leak. The report's
// last line says the same in words; zero means it says "ok".
func (r *Result) Failures() int {
	n := 0
	for _, s := range r.Scenarios {
		if failed, _ := r.Judge(s); len(failed) > 0 {
			n++
		}
	}
	if len(r.Memory.Verdict()) > 0 {
		n++
	}
	for _, l := range r.Limits {
		if strings.Contains(l, "LEAK") {
			n++
		}
	}
	return n
}
