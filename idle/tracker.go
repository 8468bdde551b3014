package idle

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// Hooks are a Tracker's calls back into its connection. They run on the
// wheel's goroutine (inside ManualClock.Advance for a manual wheel), one at a
// time, and must not block: hand a write to the connection's event loop
// (gnet's AsyncWrite, say) rather than doing it inline. They may call the
// Tracker's methods, Stop included.
type Hooks struct {
	// Close is called once when a timeout closes the connection, with the
	// reason; the Tracker has already stopped all its timers. The server
	// closes the connection and may count the reason. Required.
	Close func(Reason)
	// Probe sends one keepalive probe (an HTTP/2 PING, a gRPC ping, an MQTT
	// PINGREQ...). Required when Config.KeepaliveTime is set.
	Probe func()
	// GoAway is called once when MaxAge is reached and MaxAgeGrace is
	// set: the connection should stop taking new work (send GOAWAY), and
	// is closed with ReasonMaxAge when the grace ends. Optional.
	GoAway func()
}

// Tracker enforces one connection's timeouts on a wheel. Create it with
// NewTracker (or Init) when the connection opens and Stop it when the
// connection closes for any other reason.
//
// Time: every event is stamped with the wheel's clock, Wheel.Now. Each
// per-packet method that needs the time reads it, or takes it in its At
// variant (Init for NewTracker) from a caller that already holds it: an
// event loop that reads the clock once per batch. The times passed for one
// Tracker must not run backwards, except across the goroutines that may
// call Activity, BytesIn and Received at once: each stamp keeps the latest
// time it was given (see stamp).
//
// Costs: the per-packet methods (Activity, BytesIn, Received, FrameStart,
// FrameEnd, Written, Drained) are O(1), allocation-free and lock-free;
// Activity, BytesIn and Received never touch the wheel, FrameStart and
// Written at most about once per deadline. A method without At adds one
// clock read (about 26 ns) when it needs the time.
//
// Timers: one policy timer carries the idle, read-silence, keepalive,
// handshake and max-age timeouts; it is armed only by Init and by its own
// callback, so that per-packet calls only store a time stamp and never touch
// the wheel. A deadline further off than 100 ms is first checked at the
// last multiple of 100 ms (on the wheel's clock) before it, where the
// callback finds it moved by the stamps or arms for it exactly: the checks
// of all connections share about 10 ticks a second, so the wheel's
// goroutine wakes as often at 16 000 connections as at 10. Frame and write-stall deadlines each have a timer of their own
// (initialized only when configured), armed lazily by FrameStart and Written;
// see docs/design.md for why three and not one.
//
// Never early: every deadline is a stamp plus a duration, and its timer is
// armed for it with ResetFrom, which the wheel never fires early. A
// callback closes, probes or tells to go away only for a deadline at or
// before the clock it reads when it runs, and re-arms for the earliest one
// still to come.
//
// Goroutines: Activity, BytesIn, Received, HandshakeDone, Stop, Due and
// Reason may be called from any goroutine; FrameStart and FrameEnd from one
// goroutine at a time (the connection's reader), Written and Drained from
// one at a time (its writer). Hooks run on the wheel's goroutine.
//
// Memory: NewTracker allocates 160 bytes for a Tracker with idle and
// handshake timeouts alone; a frame timeout adds 96 bytes, a write-stall
// timeout 128, and read silence, keepalive and max age (any or all) 80.
type Tracker struct {
	// The fields a per-packet call touches come first, to share a cache
	// line. The atomic ones are shared: written by the per-packet calls,
	// HandshakeDone, Init, Stop and the callbacks, read by the callbacks
	// (and Due, Reason). w, frame and write are written by Init and only
	// read afterwards; what frame and write point to keeps its own rules
	// (see frameDeadline and writeWatch).
	w       *wheel.Wheel
	lastAct atomic.Int64   // wheel time of the last Activity
	lastIn  atomic.Int64   // wheel time of the last inbound byte
	frame   *frameDeadline // Config.FrameTimeout; nil when off
	write   *writeWatch    // Config.WriteStallTimeout; nil when off
	state   atomic.Uint32  // stateOpen until Stop or a close swaps it, once
	due     atomic.Int64   // the deadline the close was for; published by state

	handshakeAt atomic.Int64 // absolute handshake deadline; 0: done or off

	// Written by Init and only read afterwards.
	opened  int64        // wheel time of Init: the stamp of handshake and max age
	idleDur int64        // Config.IdleTimeout
	onClose func(Reason) // Hooks.Close

	// Read silence, keepalive, max age; nil when all are off. Its
	// durations and hooks are written by Init; its state (probes, goingAway)
	// belongs to the policy callback, which runs one at a time on the
	// wheel's goroutine (Init writes it before the Tracker is published).
	optional *optionalPolicies

	policy wheel.Timer // armed only by Init and by its own callback
}

// Values of Tracker.state: stateOpen, stateStopped, or a Reason (the close).
const (
	stateOpen    = 0
	stateStopped = math.MaxUint8 + 1
)

const never = math.MaxInt64

// NewTracker validates cfg and hooks and starts tracking a connection that
// opens now (the wheel's clock), with cfg's defaults filled in (see Config
// and Config.WithDefaults, whose Uses.Probe is Hooks.Probe != nil). It
// returns an error wrapping ErrNegative, ErrKeepalive, ErrMaxAge,
// ErrNoEffect, ErrTooShort (a timeout shorter than the wheel's tick) or
// ErrHook. NewTracker allocates the Tracker and arms at most one timer; it
// may be called from any goroutine.
func NewTracker(w *wheel.Wheel, cfg Config, hooks Hooks) (*Tracker, error) {
	if w == nil {
		panic("idle: NewTracker with nil wheel")
	}
	t := new(Tracker)
	if err := t.Init(w, w.Now(), cfg, hooks); err != nil {
		return nil, err
	}
	return t, nil
}

// Init is NewTracker on t (new, or embedded in a larger struct: one
// allocation for both) for a connection that opened at now, a reading of
// Wheel.Now. It fails as NewTracker does, starting nothing. Call it once.
func (t *Tracker) Init(w *wheel.Wheel, now time.Duration, cfg Config, hooks Hooks) error {
	if w == nil {
		panic("idle: Init with nil wheel")
	}
	cfg, err := cfg.run(Uses{Probe: hooks.Probe != nil, Frames: true, Handshake: true, Tick: w.Tick()})
	switch {
	case err != nil:
		return err
	case hooks.Close == nil:
		return fmt.Errorf("%w: Hooks.Close is nil", ErrHook)
	case cfg.KeepaliveTime > 0 && hooks.Probe == nil:
		return fmt.Errorf("%w: Hooks.Probe is nil but KeepaliveTime is set", ErrHook)
	}
	t.w = w
	// A deadline beyond the wheel's range is never reached; the wheel would
	// clamp its arming, whose firing would then prove nothing.
	if cfg.FrameTimeout > 0 && cfg.FrameTimeout < w.MaxDuration() {
		t.frame = &frameDeadline{dur: int64(cfg.FrameTimeout)}
		t.frame.timer.Init(w, t.onFrame)
	}
	if cfg.WriteStallTimeout > 0 && cfg.WriteStallTimeout < w.MaxDuration() {
		t.write = &writeWatch{dur: cfg.WriteStallTimeout}
		t.write.timer.Init(w, t.onWrite)
	}
	t.idleDur = int64(cfg.IdleTimeout)
	t.onClose = hooks.Close
	t.opened = int64(now)
	t.lastAct.Store(int64(now))
	t.lastIn.Store(int64(now))
	if cfg.HandshakeTimeout > 0 {
		t.handshakeAt.Store(int64(now + cfg.HandshakeTimeout))
	}
	t.optional = newOptionalPolicies(&cfg, hooks)
	t.policy.Init(w, t.onPolicy)
	t.runPolicy(int64(now))
	return nil
}

// Activity records application activity now: it restarts the idle timeout.
// Call it for whatever counts as use of the connection (a request, a
// response, a stream message), not for keepalive answers. O(1), no
// allocation, no lock; may be called from any goroutine.
func (t *Tracker) Activity() { t.ActivityAt(t.w.Now()) }

// ActivityAt is Activity at now, a reading of the wheel's Now.
func (t *Tracker) ActivityAt(now time.Duration) { stamp(&t.lastAct, int64(now)) }

// BytesIn records that inbound bytes arrived now: it restarts the
// read-silence timeout, answers outstanding keepalive probes and postpones
// the next one. It does not count as activity (see Received). O(1), no
// allocation, no lock; may be called from any goroutine.
func (t *Tracker) BytesIn() { t.BytesInAt(t.w.Now()) }

// BytesInAt is BytesIn at now, a reading of the wheel's Now.
func (t *Tracker) BytesInAt(now time.Duration) { stamp(&t.lastIn, int64(now)) }

// Received is BytesIn and Activity together, with one clock read: inbound
// bytes that count as application activity. Same cost and rules.
func (t *Tracker) Received() { t.ReceivedAt(t.w.Now()) }

// ReceivedAt is Received at now, a reading of the wheel's Now.
func (t *Tracker) ReceivedAt(now time.Duration) {
	stamp(&t.lastIn, int64(now))
	stamp(&t.lastAct, int64(now))
}

// stamp moves a forward to now, never back: a caller that read the clock
// before another goroutine's stamp may store after it, and the later event
// must win, or a timeout would run from an earlier one and fire early. It
// costs a load and a compare-and-swap, retried only if another stamp lands
// in between; a stamp already at now (or later) costs a load.
func stamp(a *atomic.Int64, now int64) {
	for old := a.Load(); old < now; old = a.Load() {
		if a.CompareAndSwap(old, now) {
			return
		}
	}
}

// HandshakeDone clears the handshake deadline: call it when the TLS
// handshake or the first frame completes. O(1); any goroutine.
func (t *Tracker) HandshakeDone() {
	if t.handshakeAt.Load() != 0 {
		t.handshakeAt.Store(0)
	}
}

// Stop stops tracking: no hook runs after it returns, except one that was
// already running, and every timer is released. It reports whether it
// stopped an open tracker (false: already stopped or closed by a timeout).
// Call it when the connection closes for any other reason. Any goroutine,
// including from a hook.
func (t *Tracker) Stop() bool {
	if !t.state.CompareAndSwap(stateOpen, stateStopped) {
		return false
	}
	t.stopTimers()
	return true
}

// Due reports the deadline whose expiry closed the connection, in the
// wheel's time (the stamp the timeout ran from plus the timeout; for
// keepalive, the time of the last probe plus the timeout), and false while
// the tracker is open or after Stop. A timeout never fires before its
// deadline, so Wheel.Now minus Due is how late the close came (at least
// zero; it includes the wheel's tick rounding). Any goroutine; Hooks.Close
// may call it.
func (t *Tracker) Due() (time.Duration, bool) {
	if s := t.state.Load(); s == stateOpen || s == stateStopped {
		return 0, false
	}
	return time.Duration(t.due.Load()), true
}

// Reason reports why the tracker closed the connection, or ReasonNone while
// it is open or after Stop. Any goroutine.
func (t *Tracker) Reason() Reason {
	if s := t.state.Load(); s != stateStopped {
		return Reason(s)
	}
	return ReasonNone
}

func (t *Tracker) stopTimers() {
	t.policy.Stop()
	if t.frame != nil {
		t.frame.timer.Stop()
	}
	if t.write != nil {
		t.write.timer.Stop()
	}
}

// arm sets tm to fire d after from (a stamp), unless the tracker has ended.
// The check after ResetFrom pairs with Stop and close, which change state
// before stopping the timers: either they see this arming, or this sees
// their state.
func (t *Tracker) arm(tm *wheel.Timer, from, d int64) {
	tm.ResetFrom(time.Duration(from), time.Duration(d))
	if t.state.Load() != stateOpen {
		tm.Stop()
	}
}

// close ends the tracker with reason r, for the deadline at (wheel time),
// and delivers it, once.
func (t *Tracker) close(r Reason, at int64) {
	t.due.Store(at) // before the state, which publishes it
	if !t.state.CompareAndSwap(stateOpen, uint32(r)) {
		return
	}
	t.stopTimers()
	t.onClose(r)
}
