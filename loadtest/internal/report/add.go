package report

import (
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// Add folds one connection's outcome into s; t says what lateness and
// earliness are tolerated. expects says whether the connection's role
// expected a close (scenario.Spec.Expects): such a connection lands in
// exactly one of s.Closes's buckets.
func (s *Scenario) Add(r ConnResult, t Timeouts, expects bool) {
	s.Conns++
	var role *Role
	if s.Hostile {
		role = s.role(r.Role)
		role.Conns++
	}
	c := s.Closes
	if !expects || c == nil {
		c = nil
	} else {
		c.Expected++
	}
	if r.DialErr != "" {
		s.DialErrors[r.DialErr]++
		if c != nil {
			c.NotStarted++
		}
		return
	}
	s.Opened++
	if role != nil {
		s.addHostile(r, role)
	}
	s.Connect.Record(int64(r.Connect))
	s.Sent += r.Sent
	s.Recv += r.Recv
	s.Lost += r.Lost
	if r.Refusal == "" {
		s.Mismatch += r.Mismatch // a refusal's bytes are no answer, and counted as the refusal
	}
	if r.Err != "" {
		s.Errors[r.Err]++
	}
	if r.End != "" {
		s.Ends[r.End]++
	}
	s.Pings += r.Pings
	if r.Survivor {
		s.Survivors++
		if r.End == EndClient {
			s.Survived++
		}
	}
	if c != nil {
		c.add(r, s.Proto, t)
	}
	if r.Role == scenario.Retransmit {
		s.RetxCount[len(r.Retx)]++
		for k, off := range r.Retx {
			for len(s.RetxError) <= k {
				s.RetxError = append(s.RetxError, &hist.Histogram{})
			}
			var want time.Duration
			if k < len(s.Ladder) {
				want = s.Ladder[k]
			}
			s.RetxError[k].Record(int64(off - want))
		}
	}
}

// add puts a connection that expected a close into one bucket: refused,
// not started, never, early, late, for another reason, or on time. Early
// is judged from the window's start, late from its end.
func (c *Closes) add(r ConnResult, proto string, t Timeouts) {
	switch {
	case r.Refusal != "":
		c.Refused++
		if c.Refusal == "" {
			c.Refusal = r.Refusal
		}
		return
	case r.Expect == "":
		c.NotStarted++
		return
	case r.ClosedAt.IsZero():
		c.Never++
		return
	}
	by := r.ExpectedBy
	if by.IsZero() || by.Before(r.ExpectedAt) {
		by = r.ExpectedAt
	}
	fromStart, fromEnd := r.ClosedAt.Sub(r.ExpectedAt), r.ClosedAt.Sub(by)
	c.FromStart.Record(int64(fromStart))
	c.FromEnd.Record(int64(fromEnd))
	c.Window.Record(int64(by.Sub(r.ExpectedAt)))
	if !r.WireFinAt.IsZero() {
		c.Wire.Record(int64(r.WireFinAt.Sub(r.ExpectedAt)))
	}
	switch {
	case fromStart < -max(t.Tick, time.Millisecond):
		c.Early++
		c.EarlyBy.Record(int64(-fromStart))
		if r.End == "dead_peer" && r.Expect != "dead_peer" {
			c.EarlyDeadPeer++
		}
	case fromEnd > t.Slack:
		c.Late++
		c.LateBy.Record(int64(fromEnd))
	case r.End != r.Expect && !(r.End == "eof" && proto == "raw" && rawTimeout[r.Expect]): // a raw server closes with EOF; a framed one must say why
		c.OtherReason[r.End]++
	default:
		c.OnTime++
	}
}

// rawTimeout holds the expected closes a raw server can give, with an EOF
// that says no reason: its idle timeout, its handshake timeout and its
// request (frame) deadline. A dead peer needs the framed protocol's PINGs.
var rawTimeout = map[string]bool{"idle": true, "handshake": true, "frame_deadline": true}

// addHostile folds a hostile connection's own figures.
func (s *Scenario) addHostile(r ConnResult, role *Role) {
	role.Opened++
	if r.End != "" {
		role.Ends[r.End]++
	}
	s.Bytes += r.Bytes
	s.Writes += r.Writes
	closed := !r.ClosedAt.IsZero() && !r.Misbehaved.IsZero() && r.End != EndClient && r.End != EndBadServerFrame
	if closed {
		s.ServerClosed++
		role.ServerClosed++
		s.CloseAfter.Record(int64(r.ClosedAt.Sub(r.Misbehaved)))
		role.CloseAfter.Record(int64(r.ClosedAt.Sub(r.Misbehaved)))
	}
	switch {
	case s.FloodBytes <= 0 || closed:
	case r.Bytes >= uint64(s.FloodBytes):
		s.FloodedOpen++
	default:
		s.FloodCut++
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
