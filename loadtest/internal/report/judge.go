package report

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// CheckKind names what a failed check is about.
type CheckKind string

// Check kinds.
const (
	CheckDial       CheckKind = "dial"        // connections that did not open
	CheckMismatch   CheckKind = "mismatch"    // answers that differed from what was expected
	CheckLimit      CheckKind = "limit"       // connflood: held or refused beyond the connection limit
	CheckLost       CheckKind = "lost"        // messages never answered
	CheckRefused    CheckKind = "refused"     // connections refused before the scenario could start
	CheckEarly      CheckKind = "early"       // closed before the window's start allowed
	CheckLate       CheckKind = "late"        // closed after the window's end and the slack
	CheckNever      CheckKind = "never"       // not closed within the horizon
	CheckDeadPeer   CheckKind = "dead_peer"   // closed as dead peers: the harness answered pings late
	CheckReason     CheckKind = "reason"      // closed for another reason
	CheckNotStarted CheckKind = "not_started" // connections whose timer never started
	CheckSurvivors  CheckKind = "survivors"   // survivors closed
	CheckNotClosed  CheckKind = "not_closed"  // hostile peers the server kept
	CheckMemory     CheckKind = "memory"      // the server's memory grew beyond its bound
)

// Status is a scenario's judgement.
type Status string

// Statuses.
const (
	StatusOK             Status = "ok"
	StatusFailed         Status = "failed"           // a check failed
	StatusNotJudged      Status = "not_judged"       // its failed checks of timing are explained by the harness's starvation
	StatusNotApplicable  Status = "not_applicable"   // not run: the run cannot judge it (Verdict.NotApplicable says why)
	StatusNothingToJudge Status = "nothing_to_judge" // run, but it gave nothing to judge (Verdict.NotApplicable says why)
)

// Verdict is one scenario's judgement.
type Verdict struct {
	Scenario      string  `json:"scenario"`
	Status        Status  `json:"status"`
	NotApplicable string  `json:"why_not,omitempty"`
	Failed        []Check `json:"failed,omitempty"`
	NotJudged     []Check `json:"not_judged,omitempty"` // failed checks the starvation explains
}

// Judgement is a result's judgement, computed once from its figures
// (Judge) and rendered by Text, JSON and the command's exit status.
type Judgement struct {
	Scenarios []Verdict `json:"scenarios"`
	Memory    []Check   `json:"memory,omitempty"` // the memory bound's failed check
	Leaks     []string  `json:"leaks,omitempty"`  // Result.Leaks
	// Judged counts the scenarios judged (ok or failed); Failures the
	// failed judgements (scenarios, the memory, a leak): exit status 1
	// if any; NotJudged the scenarios not judged because the harness was
	// starved and with no failure: exit status 3 if any and no failure.
	Judged    int `json:"judged"`
	Failures  int `json:"failures"`
	NotJudged int `json:"not_judged"`
	// Starved is SelfLag.Why when the harness was starved, else "".
	Starved string `json:"starved,omitempty"`
	// MemoryUnjudged says why the memory was not judged ("": it was, or
	// no hostile scenario ran).
	MemoryUnjudged string `json:"memory_unjudged,omitempty"`
}

// ExitStatus is the command's exit status for the judgement: 1 if a
// judgement failed, else 3 if some were not judged, else 0.
func (j *Judgement) ExitStatus() int {
	switch {
	case j.Failures > 0:
		return 1
	case j.NotJudged > 0:
		return 3
	}
	return 0
}

// Judge computes r's judgement.
func (r *Result) Judge() *Judgement {
	j := &Judgement{Leaks: r.Leaks}
	if r.SelfLag.Starved() {
		j.Starved = r.SelfLag.Why()
	}
	for _, s := range r.Scenarios {
		v := Verdict{Scenario: s.Name, Status: StatusOK, NotApplicable: s.NotApplicable}
		if v.NotApplicable != "" {
			v.Status = StatusNotApplicable
			j.Scenarios = append(j.Scenarios, v)
			continue
		}
		for _, c := range s.checks(r.Config.Timeouts) {
			if r.SelfLag.Explains(c) && (!c.Local || r.serverLocal()) {
				v.NotJudged = append(v.NotJudged, c)
			} else {
				v.Failed = append(v.Failed, c)
			}
		}
		switch why := s.nothingToJudge(); {
		case len(v.Failed) > 0:
			v.Status = StatusFailed
			j.Failures++
		case len(v.NotJudged) > 0:
			v.Status = StatusNotJudged
			j.NotJudged++
		case why != "":
			v.Status, v.NotApplicable = StatusNothingToJudge, why
		}
		if v.Status == StatusOK || v.Status == StatusFailed {
			j.Judged++
		}
		j.Scenarios = append(j.Scenarios, v)
	}
	if m := r.Memory; m != nil {
		if j.MemoryUnjudged = m.Unjudged(); j.MemoryUnjudged == "" && m.Growth() > m.Bound.Total() {
			j.Memory = []Check{{Kind: CheckMemory, Line: fmt.Sprintf("the server's memory grew by %s, beyond its bound of %s",
				scenario.MiB(m.Growth()), scenario.MiB(m.Bound.Total()))}}
			j.Failures++
		}
	}
	if len(r.Leaks) > 0 {
		j.Failures++
	}
	return j
}

// serverLocal reports whether the server ran on the harness's machine:
// embedded, or at a loopback address.
func (r *Result) serverLocal() bool {
	return strings.HasPrefix(r.Config.Target, "embedded") || LoopbackAddr(r.Config.Target)
}

// LoopbackAddr reports whether addr (HOST:PORT) is at localhost or a
// loopback IP address.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}

// LoopbackHost reports whether host (no port) is localhost or a loopback
// IP address.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checks returns the scenario's failed checks, in report order; t is the
// server's timeouts the run expected, which say how long a check of
// timing gave the harness and the server (Check.Tolerance).
func (s *Scenario) checks(t Timeouts) []Check {
	var bad []Check
	hard := func(k CheckKind, format string, a ...any) {
		bad = append(bad, Check{Kind: k, Line: fmt.Sprintf(format, a...)})
	}
	timing := func(k CheckKind, tol, need time.Duration, format string, a ...any) {
		bad = append(bad, Check{Kind: k, Line: fmt.Sprintf(format, a...), Tolerance: tol, Need: max(need, tol)})
	}
	spec := scenario.Lookup(s.Name)
	dialErrs := maps.Clone(s.DialErrors)
	if spec != nil && spec.RefusalsExpected {
		// A server may refuse a flood at the door; only the client's own
		// limits spoil the test.
		dialErrs = map[string]int{"fd_limit": s.DialErrors["fd_limit"], "ephemeral_ports": s.DialErrors["ephemeral_ports"]}
		maps.DeleteFunc(dialErrs, func(_ string, v int) bool { return v == 0 })
	}
	if n := dialErrs["timeout"]; n > 0 && s.DialWait > 0 {
		timing(CheckDial, s.DialWait, 0, "%d connections not opened within %s (dial timeout)", n, D(int64(s.DialWait)))
		delete(dialErrs, "timeout")
	}
	if n := sum(dialErrs); n > 0 {
		hard(CheckDial, "%d connections failed to open (%s)", n, counts(dialErrs))
	}
	if s.Mismatch > 0 {
		hard(CheckMismatch, "%d answers differed from what was expected", s.Mismatch)
	}
	switch {
	case s.Limit > 0 && spec != nil && spec.LimitRole != "":
		if held := s.heldBy(spec.LimitRole); held > s.Limit {
			hard(CheckLimit, "the server held %d connections of the %s open, above its limit of %d", held, spec.LimitRole, s.Limit)
		}
	case s.Limit > 0 && s.Held() > s.Limit:
		hard(CheckLimit, "the server held %d connections open, above its limit of %d", s.Held(), s.Limit)
	}
	if spec != nil && spec.ServedRole != "" {
		var conns int
		ends := map[string]int{}
		if ro := s.Roles[spec.ServedRole]; ro != nil {
			conns = ro.Conns
			maps.Copy(ends, ro.Ends)
			if n := ro.Conns - ro.Opened; n > 0 {
				ends["not_opened"] = n
			}
		}
		if held := ends[EndClient]; held < conns {
			delete(ends, EndClient)
			hard(CheckLimit, "%d of %d %s connections were not served to the end (%s)", conns-held, conns, spec.ServedRole, counts(ends))
		}
	}
	// Over raw a refusal and an idle close are both EOF: only a framed
	// server's CLOSE frames tell how many it refused.
	if n := s.Ends["overload"]; s.Limit > 0 && s.Proto != "raw" && n > max(s.Opened-s.Limit, 0) {
		hard(CheckLimit, "the server refused %d connections as overload, more than the %d beyond its limit of %d (%d opened)",
			n, max(s.Opened-s.Limit, 0), s.Limit, s.Opened)
	}
	if s.Lost > 0 {
		timing(CheckLost, s.AnswerWait, 0, "%d messages never answered (within %s)", s.Lost, D(int64(s.AnswerWait)))
	}
	if c := s.Closes; c != nil {
		bad = append(bad, c.checks(s, t)...)
	}
	if s.Survivors > s.Survived {
		// A survivor is closed when it answers, sends or finishes a frame
		// too late, or when the server is wrong.
		timing(CheckSurvivors, shortest(t.KeepaliveTimeout, t.Frame, t.Idle), 0, "%d of %d %s survivors were closed", s.Survivors-s.Survived, s.Survivors, s.Name)
	}
	if spec != nil && spec.MustClose != nil {
		bad = append(bad, s.mustCloseChecks(spec.MustClose, t.KeepaliveTimeout)...)
	}
	return bad
}

// checks is the timer check's failed checks, each line's figures over
// the connections it counts.
func (c *Closes) checks(s *Scenario, t Timeouts) []Check {
	var bad []Check
	answer := t.KeepaliveTimeout // a peer's answer to a ping that came too late is the harness's lateness
	if c.Refused > 0 && !scenario.Lookup(s.Name).RefusalsExpected {
		bad = append(bad, Check{Kind: CheckRefused, Line: fmt.Sprintf("%d of %d refused by the server before the scenario could start, saying %s (its connection limit? lower -conns, or raise the limit)",
			c.Refused, c.Expected, c.Refusal)})
	}
	if n := c.Early - c.EarlyDeadPeer; n > 0 {
		// The harness's lateness makes a close look later, never earlier;
		// a server starved on the same machine may expire a timer before
		// it reads the bytes that were to reset it.
		early := time.Duration(c.EarlyBy.Max())
		bad = append(bad, Check{Kind: CheckEarly, Line: fmt.Sprintf("%d of %d closed EARLY, before their deadline counted from the last byte sent (the earliest the server saw activity): by %s",
			n, c.Expected, spread(c.EarlyBy)), Tolerance: max(t.Tick, time.Millisecond), Need: early, Local: true})
	}
	if c.EarlyDeadPeer > 0 {
		bad = append(bad, Check{Kind: CheckDeadPeer, Line: fmt.Sprintf("%d of %d closed as dead peers before their deadline: the harness did not answer the server's pings within %s",
			c.EarlyDeadPeer, c.Expected, D(int64(answer))), Tolerance: answer, Need: answer})
	}
	if c.Late > 0 {
		bad = append(bad, Check{Kind: CheckLate, Line: fmt.Sprintf("%d of %d closed late, after their deadline counted from the server's last answer (the latest it saw activity) and the %s slack: by %s",
			c.Late, c.Expected, D(int64(t.Slack)), spread(c.LateBy)), Tolerance: t.Slack, Need: max(time.Duration(c.LateBy.Max())-t.Slack, t.Slack)})
	}
	if c.Never > 0 {
		bad = append(bad, Check{Kind: CheckNever, Line: fmt.Sprintf("%d of %d not closed within %s of their deadline", c.Never, c.Expected, D(int64(s.Horizon))),
			Tolerance: t.Slack, Need: max(s.Horizon, t.Slack)})
	}
	wrong := maps.Clone(c.OtherReason)
	if n := wrong["dead_peer"]; n > 0 && c.Expect != "dead_peer" {
		bad = append(bad, Check{Kind: CheckDeadPeer, Line: fmt.Sprintf("%d of %d closed as dead peers (the harness did not answer the server's pings within %s)", n, c.Expected, D(int64(answer))),
			Tolerance: answer, Need: answer})
	}
	delete(wrong, "dead_peer")
	if n := sum(wrong); n > 0 {
		bad = append(bad, Check{Kind: CheckReason, Line: fmt.Sprintf("%d of %d closed for another reason (%s)", n, c.Expected, counts(wrong))})
	}
	if n := c.NotStarted - sum(s.DialErrors); n > 0 {
		// Dial failures have their own line; these opened and ended
		// before their timer could start: closed without a word, or a
		// message never answered (which has its own line too).
		bad = append(bad, Check{Kind: CheckNotStarted, Line: fmt.Sprintf("%d of %d ended before their timer could start (%s)", n, c.Expected, counts(s.Errors)),
			Tolerance: s.AnswerWait, Need: s.AnswerWait})
	}
	return bad
}

// spread describes a histogram of the connections a line counts: p50,
// p99 and max.
func spread(h *hist.Histogram) string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()))
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

// mustCloseChecks is the failed checks of a hostile scenario whose every
// connection the server must close (mc): a connection the server did not
// close, a close later than CloseWithin after the misbehaviour began, and,
// framed, a close that did not say one of mc's reasons. A close not seen
// within the window is a check of timing; what was sent whole and kept, or
// held when the memory passed its bound, is not. answer is how long the
// server gives a peer to answer its ping.
func (s *Scenario) mustCloseChecks(mc *scenario.MustClose, answer time.Duration) []Check {
	var bad []Check
	hard := func(format string, a ...any) {
		bad = append(bad, Check{Kind: CheckNotClosed, Line: fmt.Sprintf(format, a...)})
	}
	within := max(s.CloseWithin, scenario.GarbageWaitMin)
	switch {
	case s.FloodBytes > 0: // nonreader: only a connection that sent its whole flood must be closed
		if s.FloodedOpen > 0 {
			hard("%d of %d %s sent their whole flood (%s) and were not closed by the server (%s)",
				s.FloodedOpen, s.Opened, mc.What, scenario.MiB(s.FloodBytes), mc.Why)
		}
		if s.FloodStoppedOpen > 0 {
			hard("%d of %d %s were still open when the server's memory passed its bound (%s)", s.FloodStoppedOpen, s.Opened, mc.What, mc.Why)
		}
	case s.Opened > s.ServerClosed:
		bad = append(bad, Check{Kind: CheckNotClosed, Line: fmt.Sprintf("%d of %d %s were not closed by the server (%s)", s.Opened-s.ServerClosed, s.Opened, mc.What, mc.Why),
			Tolerance: scenario.GarbageWaitMin, Need: within})
	}
	if s.CloseWithin > 0 && s.CloseAfter.Max() > int64(s.CloseWithin) {
		bad = append(bad, Check{Kind: CheckLate, Line: fmt.Sprintf("the server closed %s as late as %s after their misbehaviour began, beyond the %s bound (the sending window)",
			mc.What, D(s.CloseAfter.Max()), D(int64(s.CloseWithin))),
			Tolerance: scenario.GarbageWaitMin, Need: time.Duration(s.CloseAfter.Max()) - s.CloseWithin})
	}
	if len(mc.Reasons) > 0 && s.Proto != "raw" {
		other := maps.Clone(s.Ends)
		maps.DeleteFunc(other, func(k string, _ int) bool { return k == EndClient || slices.Contains(mc.Reasons, k) })
		if n := other["dead_peer"]; n > 0 && answer > 0 {
			bad = append(bad, Check{Kind: CheckDeadPeer, Line: fmt.Sprintf("%d %s closed as dead peers (the harness did not answer the server's pings within %s)", n, mc.What, D(int64(answer))),
				Tolerance: answer, Need: answer})
			delete(other, "dead_peer")
		}
		if n := sum(other); n > 0 {
			bad = append(bad, Check{Kind: CheckReason, Line: fmt.Sprintf("%d %s ended without a CLOSE frame saying %s (%s)", n, mc.What, strings.Join(mc.Reasons, " or "), counts(other))})
		}
	}
	return bad
}

// nothingToJudge says why a scenario that ran gave nothing to judge, or
// "": nonreader when no connection sent its whole flood or was closed.
func (s *Scenario) nothingToJudge() string {
	if s.FloodBytes > 0 && s.Opened > 0 && s.FloodCut == s.Opened && s.FloodStoppedOpen == 0 {
		return fmt.Sprintf("no connection sent its whole flood (%s) or was closed within the window (-duration): "+
			"the window ended first, or the server stopped reading from them, so there is nothing to judge", scenario.MiB(s.FloodBytes))
	}
	return ""
}

// Scenario returns the named scenario's verdict, or the zero Verdict.
func (j *Judgement) Scenario(name string) Verdict {
	for _, v := range j.Scenarios {
		if v.Scenario == name {
			return v
		}
	}
	return Verdict{}
}

// Lines returns the verdict's failed checks' lines.
func (v Verdict) Lines() []string {
	var out []string
	for _, c := range v.Failed {
		out = append(out, c.Line)
	}
	return out
}
