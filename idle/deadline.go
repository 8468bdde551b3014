package idle

import (
	"sync/atomic"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// timedDeadline is a deadline with the timer that enforces it, allocated
// only when its timeout is configured, so that a connection without a
// frame deadline does not carry its timer.
type timedDeadline struct {
	deadline
	timer wheel.Timer
}

// deadline is an absolute deadline that a per-packet event starts (a
// frame's first byte) and another clears, enforced by a
// timer of its own.
//
// Ownership: at and armed are shared and accessed only atomically; dur is
// written by Init. at is written by the event methods (one goroutine at a
// time). armed is the deadline the timer is armed for, and tells who may
// arm it: while it is 0 the timer is free and an event that swaps in its
// own deadline arms it; while it is not, only the timer's callback arms it,
// storing the new deadline first. One party at a time thus arms the timer,
// and armed always names the deadline the pending arming is for.
type deadline struct {
	dur   int64        // the configured timeout; 0: off
	at    atomic.Int64 // stamp + dur of the deadline running; 0: none
	armed atomic.Int64 // the deadline the timer is armed for; 0: timer free
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

// FrameStartAt is FrameStart at now, a reading of the wheel's Now.
func (t *Tracker) FrameStartAt(now time.Duration) {
	if t.frame != nil {
		t.begin(t.frame, int64(now))
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

// begin starts deadline d at now unless it is running, and arms its timer
// if the timer is free. A timer that is not free is armed for an earlier
// deadline (deadlines only grow), and its callback re-arms it for this one.
func (t *Tracker) begin(d *timedDeadline, now int64) {
	if d.at.Load() != 0 {
		return
	}
	at := now + d.dur
	d.at.Store(at)
	if d.armed.Load() == 0 && d.armed.CompareAndSwap(0, at) {
		t.arm(&d.timer, now, d.dur)
	}
}

// onFrame is the frame timer's callback.
func (t *Tracker) onFrame() {
	t.onDeadline(t.frame, ReasonFrameDeadline)
}

// onDeadline handles the firing of d's timer: it closes with r if the
// deadline running is the one the timer was armed for, re-arms the timer
// for the deadline running if it is another (a later frame), and
// otherwise frees the timer for the next event to arm.
func (t *Tracker) onDeadline(d *timedDeadline, r Reason) {
	if t.state.Load() != stateOpen {
		return
	}
	armed := d.armed.Load()
	at := d.at.Load()
	switch {
	case at != 0 && at == armed:
		t.close(r, at)
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
