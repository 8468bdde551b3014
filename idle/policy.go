package idle

import (
	"math"
	"math/rand/v2"
	"time"
)

// optionalPolicies holds what read silence, keepalive and max age need,
// allocated only when one of them is configured, so that a connection with
// an idle timeout alone does not carry it. newOptionalPolicies writes the
// durations and hooks; probeAt, probes and goingAway belong to the policy
// callback (see Tracker).
type optionalPolicies struct {
	silenceDur int64 // Config.ReadSilenceTimeout
	kaTime     int64 // Config.KeepaliveTime
	kaWait     int64 // Config.KeepaliveTimeout
	ageDur     int64 // max age drawn for this connection; 0: off
	grace      int64 // Config.MaxAgeGrace
	probe      func()
	goAway     func()

	probeAt   int64 // wheel time at which the last probe was sent
	count     int32 // KeepaliveCount, defaulted to 1
	probes    int32 // unanswered probes sent
	goingAway bool  // Hooks.GoAway has been called
}

// newOptionalPolicies returns the optional policies cfg (validated)
// configures, or nil if it configures none.
func newOptionalPolicies(cfg *Config, hooks Hooks) *optionalPolicies {
	if cfg.ReadSilenceTimeout == 0 && cfg.KeepaliveTime == 0 && cfg.MaxAge == 0 {
		return nil
	}
	p := &optionalPolicies{
		silenceDur: int64(cfg.ReadSilenceTimeout),
		kaTime:     int64(cfg.KeepaliveTime),
		kaWait:     int64(cfg.KeepaliveTimeout),
		grace:      int64(cfg.MaxAgeGrace),
		probe:      hooks.Probe,
		goAway:     hooks.GoAway,
		count:      int32(min(max(cfg.KeepaliveCount, 1), math.MaxInt32)),
	}
	if cfg.MaxAge > 0 {
		p.ageDur = drawAge(cfg)
	}
	return p
}

// drawAge draws a connection's max age uniformly from [MaxAge-MaxAgeJitter,
// MaxAge+MaxAgeJitter], whose upper end saturates at the largest Duration
// (2*MaxAgeJitter+1 overflows an int64 from a jitter of 2^62 up): the draw
// covers the ages a Duration can hold, each as likely, instead of piling
// onto the saturated end. cfg is validated: 0 <= MaxAgeJitter < MaxAge.
func drawAge(cfg *Config) int64 {
	lo := cfg.MaxAge - cfg.MaxAgeJitter // >= 1
	hi := satAdd(cfg.MaxAge, cfg.MaxAgeJitter)
	return int64(lo) + jitter(cfg.Jitter, int64(hi-lo)+1) // hi-lo < MaxInt64
}

// jitter returns a number in [0, n) from src (math/rand/v2 if nil), clamped.
func jitter(src func(int64) int64, n int64) int64 {
	if n <= 1 {
		return 0
	}
	if src == nil {
		return rand.Int64N(n)
	}
	return min(max(src(n), 0), n-1)
}

// after returns the deadline d after the stamp from, saturated.
func after(from, d int64) int64 {
	return int64(satAdd(time.Duration(from), time.Duration(d)))
}

// schedule is one run of the policies: the clock it read, and the earliest
// deadline still to come.
type schedule struct {
	now, next int64 // next: never if none
}

// due reports whether deadline at has passed (at or before now), and keeps
// it for the next arming if not.
func (s *schedule) due(at int64) bool {
	if at <= s.now {
		return true
	}
	s.next = min(s.next, at)
	return false
}

// onPolicy is the policy timer's callback.
func (t *Tracker) onPolicy() {
	if t.state.Load() != stateOpen {
		return
	}
	t.runPolicy(int64(t.w.Now()))
}

// runPolicy closes the connection, sends a probe or tells it to go away for every
// deadline at or before now, and re-arms the policy timer for the earliest
// deadline to come. now is the wheel's clock, read before the stamps. Runs
// on the wheel's goroutine (or in NewTracker).
func (t *Tracker) runPolicy(now int64) {
	s := schedule{now: now, next: never}
	if r, at := t.firstDue(&s); r != ReasonNone {
		t.close(r, at)
		return
	}
	// A deadline beyond the wheel's range (MaxDuration after its start:
	// 69 years at a 1 ms tick) is never reached, and not armed for: the
	// wheel would clamp the arming to the end of its range.
	if t.state.Load() == stateOpen && s.next < int64(t.w.MaxDuration()) {
		t.arm(&t.policy, now, checkAt(now, s.next)-now)
	}
}

// checkGrid spaces the instants at which the policy timers check deadlines
// further off than it: every tracker's check falls on a multiple of it,
// so that the wheel's goroutine wakes once for all the connections whose
// stamps moved their deadlines (one callback per idle period each),
// about 10 times a second, not once per connection per period.
const checkGrid = int64(100 * time.Millisecond)

// checkAt returns when the policy timer is armed for, at now, for the
// deadline next: next itself within checkGrid of now, so that a close
// comes on time; otherwise the last multiple of checkGrid before it,
// after now, where the callback finds the deadline moved by the stamps
// meanwhile, or arms for it exactly.
func checkAt(now, next int64) int64 {
	if next-now <= checkGrid {
		return next
	}
	return next - next%checkGrid // > next-checkGrid > now; next > 0
}

// firstDue returns the first close that is due, with its deadline, in this
// order: handshake, dead peer, idle, keepalive, max age; so no probe is
// sent, nor a go-away started, on a connection that is closing anyway.
func (t *Tracker) firstDue(s *schedule) (Reason, int64) {
	if at := t.handshakeAt.Load(); at != 0 && s.due(at) {
		return ReasonHandshake, at
	}
	in := t.lastIn.Load()
	p := t.optional
	if p != nil && p.silenceDur > 0 {
		if at := after(in, p.silenceDur); s.due(at) {
			return ReasonDeadPeer, at
		}
	}
	if t.idleDur > 0 {
		if at := after(t.lastAct.Load(), t.idleDur); s.due(at) {
			return ReasonIdle, at
		}
	}
	if p == nil {
		return ReasonNone, 0
	}
	if r, at := p.keepalive(s, in); r != ReasonNone {
		return r, at
	}
	return p.maxAge(s, t.opened)
}

// keepalive sends a probe when KeepaliveTime has passed since the last
// inbound byte, or KeepaliveTimeout since an unanswered probe, and reports
// ReasonKeepalive, with its deadline, once KeepaliveCount probes went
// unanswered. Any byte stamped at or after a probe answers it.
func (p *optionalPolicies) keepalive(s *schedule, in int64) (Reason, int64) {
	if p.kaTime == 0 {
		return ReasonNone, 0
	}
	if p.probes > 0 && in >= p.probeAt {
		p.probes = 0 // answered
	}
	at := after(in, p.kaTime) // the next probe
	if p.probes > 0 {
		at = after(p.probeAt, p.kaWait) // the answer to the last one
	}
	if s.due(at) {
		if p.probes >= p.count {
			return ReasonKeepalive, at
		}
		p.probes++
		p.probeAt = s.now
		p.probe()
		s.due(after(s.now, p.kaWait))
	}
	if p.probes > 0 {
		// An answer arriving from now on makes the next probe due
		// KeepaliveTime after it, which may come before the probe's
		// timeout: wake by then to notice.
		s.due(after(s.now, p.kaTime))
	}
	return ReasonNone, 0
}

// maxAge tells the connection to go away when its age is reached (closes it, with no
// grace) and reports ReasonMaxAge, with its deadline, when the grace is
// over too.
func (p *optionalPolicies) maxAge(s *schedule, opened int64) (Reason, int64) {
	if p.ageDur == 0 {
		return ReasonNone, 0
	}
	at := after(opened, p.ageDur)
	if !p.goingAway {
		if !s.due(at) {
			return ReasonNone, 0
		}
		if p.grace == 0 {
			return ReasonMaxAge, at
		}
		p.goingAway = true
		if p.goAway != nil {
			p.goAway()
		}
	}
	if at = after(at, p.grace); s.due(at) {
		return ReasonMaxAge, at
	}
	return ReasonNone, 0
}
