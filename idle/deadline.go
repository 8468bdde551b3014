package idle

import (
	"sync/atomic"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// frameDeadline is the frame deadline, which FrameStart starts and
// FrameEnd clears, with the timer that enforces it: allocated only when
// FrameTimeout is set, so that a connection without one does not carry it.
//
// Ownership: at and armed are shared and accessed only atomically; dur and
// timer are written by Init. at is written by the event methods (one
// goroutine at a time). armed is the deadline the timer is armed for, and
// tells who may arm it: while it is 0 the timer is free and an event that
// swaps in its own deadline arms it; while it is not, only the timer's
// callback arms it, storing the new deadline first. One party at a time thus
// arms the timer, and armed always names the deadline the pending arming is
// for.
type frameDeadline struct {
	dur   int64        // Config.FrameTimeout
	at    atomic.Int64 // stamp + dur of the deadline running; 0: none
	armed atomic.Int64 // the deadline the timer is armed for; 0: timer free
	timer wheel.Timer
}

// FrameStart records that the first byte of a frame arrived: unless a frame
// is already in flight, it starts the frame deadline, FrameTimeout from now.
// Calling it again before FrameEnd does not extend the deadline, so it may
// be called for every partial read; it reads the clock only when it starts
// a deadline. Nothing happens if FrameTimeout is 0. O(1), no allocation, no
// lock; touches the wheel at most about once per FrameTimeout. Call
// FrameStart and FrameEnd from one goroutine at a time (the connection's
// reader).
func (t *Tracker) FrameStart() {
	if t.frame != nil && t.frame.at.Load() == 0 {
		t.FrameStartAt(t.w.Now())
	}
}

// FrameStartAt is FrameStart at now, a reading of the wheel's Now. A timer
// that is not free is armed for an earlier deadline (deadlines only grow),
// and its callback re-arms it for this one.
func (t *Tracker) FrameStartAt(now time.Duration) {
	d := t.frame
	if d == nil || d.at.Load() != 0 {
		return
	}
	at := int64(now) + d.dur
	d.at.Store(at)
	if d.armed.Load() == 0 && d.armed.CompareAndSwap(0, at) {
		t.arm(&d.timer, int64(now), d.dur)
	}
}

// FrameEnd records that the frame in flight is complete, clearing its
// deadline. The timer is left to lapse rather than stopped: re-arming it on
// the next frame is then usually free. O(1); same rules as FrameStart.
func (t *Tracker) FrameEnd() {
	if t.frame != nil && t.frame.at.Load() != 0 {
		t.frame.at.Store(0)
	}
}

// onFrame is the frame timer's callback: it closes with
// ReasonFrameDeadline if the deadline running is the one the timer was
// armed for, re-arms the timer for the deadline running if it is another (a
// later frame), and otherwise frees the timer for the next event to arm.
func (t *Tracker) onFrame() {
	d := t.frame
	if t.state.Load() != stateOpen {
		return
	}
	armed := d.armed.Load()
	at := d.at.Load()
	switch {
	case at != 0 && at == armed:
		t.close(ReasonFrameDeadline, at)
		return
	case at != 0:
		d.armed.Store(at)
	default:
		// Cleared. Free the timer; an event that started a deadline
		// meanwhile found it taken, so take it back for that one.
		d.armed.Store(0)
		if at = d.at.Load(); at == 0 || !d.armed.CompareAndSwap(0, at) {
			return
		}
	}
	t.arm(&d.timer, at-d.dur, d.dur)
}
