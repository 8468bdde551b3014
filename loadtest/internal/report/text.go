package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// Text writes the human-readable report of r and its judgement j (Judge).
func Text(w io.Writer, r *Result, j *Judgement) {
	c := r.Config
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("netwheel load test: %s server (%s), %s protocol, %s", c.Server, c.Target, c.Proto, r.End.Sub(r.Start).Round(10*time.Millisecond))
	t := c.Timeouts
	if c.Known != nil {
		t = *c.Known // an external server: only what the flags said
	}
	p("  %s", t.String())
	if c.Payload != "" || c.Expect != "" {
		p("  each message %s; an answer: %s", strconv.Quote(c.Payload), c.Expect)
	}
	if len(r.Shards) > 0 && !(len(r.Shards) == 1 && r.Shards[0] == "1/1") {
		p("  shards: %s", strings.Join(r.Shards, ", "))
	}
	// The server's own close delay goes under the idle scenario's close
	// errors, or after the scenarios if there is none.
	delayUnder, delayWhat := "", "timeout closes"
	if r.CloseDelay != nil {
		for _, s := range r.Scenarios {
			switch {
			case s.Closes == nil || s.Closes.Expected == 0:
			case s.Name == scenario.Idle:
				delayUnder = s.Name
			default:
				delayWhat = "timeout closes of every scenario"
			}
		}
	}
	for i, s := range r.Scenarios {
		v := j.Scenarios[i]
		p("")
		scenarioText(p, r, s, v)
		if s.Name == delayUnder {
			p("  %s", closeDelayText(r.CloseDelay, delayWhat))
		}
	}
	if r.CloseDelay != nil && delayUnder == "" {
		p("")
		p("%s", closeDelayText(r.CloseDelay, delayWhat))
	}
	runText(p, r, j)
}

// statusText is a status as the report's scenario line says it.
var statusText = map[Status]string{StatusOK: "ok", StatusFailed: "CHECK", StatusNotJudged: "not judged",
	StatusNotApplicable: "not applicable", StatusNothingToJudge: "nothing to judge"}

// scenarioText writes one scenario's block: only what it ran.
func scenarioText(p func(string, ...any), r *Result, s *Scenario, v Verdict) {
	if v.Status == StatusNotApplicable {
		p("[%s] not applicable: %s", s.Name, v.NotApplicable)
		return
	}
	p("[%s] %s: %d/%d connections opened, connect p99 %s", s.Name, statusText[v.Status], s.Opened, s.Conns, D(s.Connect.Quantile(0.99)))
	if v.Status == StatusNothingToJudge {
		p("  nothing to judge: %s", v.NotApplicable)
	}
	spec := scenario.Lookup(s.Name)
	if s.Latency.Count() > 0 {
		rate := ""
		if s.Elapsed > 0 {
			rate = fmt.Sprintf(", %.0f msgs/s", float64(s.Recv)/s.Elapsed.Seconds())
		}
		p("  messages: %d sent, %d %s, %d lost%s", s.Sent, s.Recv, answeredWord(r.Config), s.Lost, rate)
		p("  latency:  %s", quantiles(s.Latency))
	}
	if c := s.Closes; c != nil && c.Expected > 0 {
		closesText(p, c, s.Horizon)
	}
	if s.Survivors > 0 {
		p("  survivors: %d of %d stayed open; %d pings received in all", s.Survived, s.Survivors, s.Pings)
	}
	if spec != nil && spec.Hostile {
		hostileText(p, s)
	}
	if s.Name == scenario.Retransmit && s.Opened > 0 {
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
	if len(s.Ends) > 0 {
		p("  ended: %s", counts(s.Ends))
	}
	if len(s.Errors) > 0 {
		p("  errors: %s", counts(s.Errors))
	}
	for _, b := range v.Failed {
		p("  ! %s", b.Line)
	}
	if len(v.NotJudged) > 0 {
		p("  not judged: %s:", r.SelfLag.Why())
	}
	for _, c := range v.NotJudged {
		p("  ~ %s", c.Line)
	}
}

// answeredWord is what the report calls the server's answers: echoed for
// an echo server, answered for another protocol.
func answeredWord(c Config) string {
	if c.Expect != "" && c.Expect != "echo" {
		return "answered"
	}
	return "echoed"
}

// closesText writes the timer check's counts, which add up, and its close
// errors from both ends of the window.
func closesText(p func(string, ...any), c *Closes, horizon time.Duration) {
	line := fmt.Sprintf("  %d expected to close by %q: %d on time, %d late, %d never (within %s), %d early",
		c.Expected, c.Expect, c.OnTime, c.Late, c.Never, D(int64(horizon)), c.Early)
	if n := sum(c.OtherReason); n > 0 {
		line += fmt.Sprintf(", %d for another reason (%s)", n, counts(c.OtherReason))
	}
	if c.Refused > 0 {
		line += fmt.Sprintf(", %d refused", c.Refused)
	}
	if c.NotStarted > 0 {
		line += fmt.Sprintf(", %d ended before their timer started", c.NotStarted)
	}
	p("%s", line)
	if c.FromStart.Count() == 0 {
		return
	}
	if c.Window.Max() > 0 {
		p("  close error from the server's last answer (late if above the slack): %s", errText(c.FromEnd))
		p("  close error from the last byte sent (early if below the tick):       %s", errText(c.FromStart))
		p("  last byte sent to last answer: p50 %s  p99 %s  max %s", D(c.Window.Quantile(0.5)), D(c.Window.Quantile(0.99)), D(c.Window.Max()))
	} else {
		p("  close error (observed - deadline): %s", errText(c.FromStart))
	}
	if c.Wire.Count() > 0 {
		p("  close error on the wire (the server's FIN, kernel timestamp, from the last byte sent): %s", errText(c.Wire))
	}
}

func errText(h *hist.Histogram) string {
	return fmt.Sprintf("p50 %s  p99 %s  max %s  min %s", D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()), D(h.Min()))
}

func quantiles(h *hist.Histogram) string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s", D(h.Quantile(0.5)), D(h.Quantile(0.9)),
		D(h.Quantile(0.99)), D(h.Quantile(0.999)), D(h.Max()))
}

// hostileText writes what the server did with a hostile scenario's
// connections.
func hostileText(p func(string, ...any), s *Scenario) {
	switch s.Name {
	case scenario.Nonreader:
		p("  sent %s (%d messages) in %d writes, reading nothing", scenario.MiB(int64(s.Bytes)), s.Sent, s.Writes)
	case scenario.Pingflood:
		p("  sent %d pings (%s) in %d writes; %d pongs read", s.Sent, scenario.MiB(int64(s.Bytes)), s.Writes, s.Recv)
	case scenario.Splitter:
		per := 0.0
		if s.Writes > 0 {
			per = float64(s.Bytes) / float64(s.Writes)
		}
		p("  %d bytes in %d writes (%.1f bytes a write); %d echoes differed from what was sent", s.Bytes, s.Writes, per, s.Mismatch)
	case scenario.Connflood:
		limit := "no limit told (-max-conns)"
		if s.Limit > 0 {
			limit = fmt.Sprintf("limit %d", s.Limit)
		}
		p("  %s: %d held open to the end, %d closed by the server, %d refused at dial (%s)",
			limit, s.Held(), s.ServerClosed, sum(s.DialErrors), counts(s.DialErrors))
	case scenario.Sourceflood:
		fl, nb := s.Roles[scenario.RoleFlooder], s.Roles[scenario.RoleNeighbour]
		if fl == nil {
			fl = &Role{}
		}
		if nb == nil {
			nb = &Role{}
		}
		p("  per-source limit %d: the flooding source held %d of %d open to the end; %d of %d other sources served to the end",
			s.Limit, fl.Ends[EndClient], fl.Conns, nb.Ends[EndClient], nb.Conns)
	}
	closed := fmt.Sprintf("  closed by the server: %d of %d", s.ServerClosed, s.Opened)
	if h := s.CloseAfter; h.Count() > 0 {
		from := "the misbehaviour began"
		if s.Name == scenario.Connflood {
			from = "the connect"
		}
		closed += fmt.Sprintf(", after %s: p50 %s  p99 %s  max %s", from, D(h.Quantile(0.5)), D(h.Quantile(0.99)), D(h.Max()))
	}
	p("%s", closed)
	if len(s.Roles) > 1 {
		for _, name := range slices.Sorted(maps.Keys(s.Roles)) {
			ro := s.Roles[name]
			line := fmt.Sprintf("    %s: %d of %d closed", name, ro.ServerClosed, ro.Opened)
			if ro.CloseAfter.Count() > 0 {
				line += fmt.Sprintf(" (p50 %s, max %s)", D(ro.CloseAfter.Quantile(0.5)), D(ro.CloseAfter.Max()))
			}
			p("%s; ended: %s", line, counts(ro.Ends))
		}
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
	if t.Handshake > 0 {
		parts = append(parts, "handshake "+t.Handshake.String())
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
