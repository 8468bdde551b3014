package report

import (
	"errors"
	"fmt"
	"slices"

	"github.com/netwheel/netwheel/internal/hist"
)

// ErrMerge is wrapped by every error of Merge.
var ErrMerge = errors.New("report: cannot merge")

// Merge combines the results of several runs, normally the shards of one
// test, into a new Result: counts add up, histograms merge, the time span
// covers all runs; the inputs are not modified. The server's own close
// delay is added up bucket by bucket when every run has it with the same
// buckets and no two runs read the same external server; otherwise it is
// dropped with a note. The runs must share
// version, protocol, scenarios and timeouts; a shard that appears twice is
// refused, since its connections would count double.
func Merge(rs ...*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no results", ErrMerge)
	}
	first := rs[0]
	out := &Result{Version: Version, Config: first.Config, Start: first.Start, End: first.End}
	seen := map[string]bool{}
	for i, r := range rs {
		if r.Version != Version {
			return nil, fmt.Errorf("%w: result %d has format version %d, want %d", ErrMerge, i+1, r.Version, Version)
		}
		if r.Config.Proto != first.Config.Proto || r.Config.Timeouts != first.Config.Timeouts ||
			!slices.Equal(r.Config.Scenarios, first.Config.Scenarios) {
			return nil, fmt.Errorf("%w: result %d was run with another protocol, scenarios or timeouts", ErrMerge, i+1)
		}
		for _, sh := range r.Shards {
			if seen[sh] && sh != "" {
				return nil, fmt.Errorf("%w: shard %s appears twice", ErrMerge, sh)
			}
			seen[sh] = true
			out.Shards = append(out.Shards, sh)
		}
		if r.Start.Before(out.Start) {
			out.Start = r.Start
		}
		if r.End.After(out.End) {
			out.End = r.End
		}
		out.Limits = appendNew(out.Limits, r.Limits...)
		out.Notes = appendNew(out.Notes, r.Notes...)
		out.Leaks = appendNew(out.Leaks, r.Leaks...)
		if i > 0 {
			out.Config.Duration = max(out.Config.Duration, r.Config.Duration)
		}
		for _, s := range r.Scenarios {
			m := out.Scenario(s.Name)
			if m == nil {
				expect := ""
				if s.Closes != nil {
					expect = s.Closes.Expect
				}
				m = NewScenario(s.Name, expect)
				m.Ladder, m.GiveUpAt = s.Ladder, s.GiveUpAt
				m.Hostile, m.Limit, m.Proto, m.CloseWithin, m.FloodBytes = s.Hostile, s.Limit, s.Proto, s.CloseWithin, s.FloodBytes
				out.Scenarios = append(out.Scenarios, m)
			}
			m.CloseWithin = max(m.CloseWithin, s.CloseWithin) // shards may have run for different windows
			if m.NotApplicable == "" {
				m.NotApplicable = s.NotApplicable
			}
			m.merge(s)
		}
		if r.Server != nil && len(rs) == 1 {
			out.Server = r.Server
		}
		if r.Process != nil && len(rs) == 1 {
			out.Process = r.Process
		}
		if r.Remote != nil && len(rs) == 1 {
			out.Remote = r.Remote
		}
		if r.Memory != nil && len(rs) == 1 {
			out.Memory = r.Memory
		}
		if r.SelfLag != nil {
			if out.SelfLag == nil {
				out.SelfLag = &SelfLag{Lag: &hist.Histogram{}}
			}
			out.SelfLag.merge(r.SelfLag)
		}
	}
	cd, note := mergeCloseDelay(rs)
	out.CloseDelay = cd
	if note != "" {
		out.Notes = appendNew(out.Notes, note)
	}
	if len(rs) > 1 {
		but := ""
		if cd != nil {
			but = " (but for the server's own close delay, added up)"
		}
		out.Notes = appendNew(out.Notes, fmt.Sprintf("merged from %d results; server and process figures are per run and not merged%s", len(rs), but))
	}
	return out, nil
}

func appendNew(dst []string, src ...string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

func (s *Scenario) merge(o *Scenario) {
	s.Conns += o.Conns
	s.Opened += o.Opened
	s.Elapsed = max(s.Elapsed, o.Elapsed)
	s.Sent += o.Sent
	s.Recv += o.Recv
	s.Lost += o.Lost
	addMap(s.DialErrors, o.DialErrors)
	addMap(s.Errors, o.Errors)
	addMap(s.Ends, o.Ends)
	for k, v := range o.RetxCount {
		s.RetxCount[k] += v
	}
	s.Latency.Merge(o.Latency)
	s.Connect.Merge(o.Connect)
	if s.Closes != nil && o.Closes != nil {
		s.Closes.merge(o.Closes)
	}
	s.Horizon = max(s.Horizon, o.Horizon)
	s.AnswerWait = max(s.AnswerWait, o.AnswerWait)
	s.DialWait = max(s.DialWait, o.DialWait)
	s.Survivors += o.Survivors
	s.Survived += o.Survived
	s.Pings += o.Pings
	s.Bytes += o.Bytes
	s.Writes += o.Writes
	s.Mismatch += o.Mismatch
	s.ServerClosed += o.ServerClosed
	s.FloodedOpen += o.FloodedOpen
	s.FloodCut += o.FloodCut
	s.FloodStoppedOpen += o.FloodStoppedOpen
	s.CloseAfter.Merge(o.CloseAfter)
	for name, r := range o.Roles {
		m := s.role(name)
		m.Conns += r.Conns
		m.Opened += r.Opened
		m.ServerClosed += r.ServerClosed
		addMap(m.Ends, r.Ends)
		m.CloseAfter.Merge(r.CloseAfter)
	}
	for k, h := range o.RetxError {
		for len(s.RetxError) <= k {
			s.RetxError = append(s.RetxError, &hist.Histogram{})
		}
		s.RetxError[k].Merge(h)
	}
}

func (c *Closes) merge(o *Closes) {
	c.Expected += o.Expected
	c.OnTime += o.OnTime
	c.Late += o.Late
	c.Never += o.Never
	c.Early += o.Early
	c.EarlyDeadPeer += o.EarlyDeadPeer
	addMap(c.OtherReason, o.OtherReason)
	c.Refused += o.Refused
	if c.Refusal == "" {
		c.Refusal = o.Refusal
	}
	c.NotStarted += o.NotStarted
	for _, h := range []struct{ dst, src *hist.Histogram }{{c.FromStart, o.FromStart}, {c.FromEnd, o.FromEnd},
		{c.Window, o.Window}, {c.LateBy, o.LateBy}, {c.EarlyBy, o.EarlyBy}, {c.Wire, o.Wire}} {
		if h.src != nil {
			h.dst.Merge(h.src)
		}
	}
}

func addMap(dst, src map[string]int) {
	for k, v := range src {
		dst[k] += v
	}
}
