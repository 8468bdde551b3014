package idle

import (
	"fmt"
	"math"
	"math/rand/v2"
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
	// Drain is called once when MaxAge is reached and MaxAgeGrace is set:
	// the connection should stop taking new work (send GOAWAY). Optional.
	Drain func()
}

// Tracker enforces one connection's timeouts on a wheel. Create it with New
// when the connection opens and Stop it when the connection closes for any
// other reason. The per-packet methods (Activity, BytesIn, Received,
// FrameStart, FrameEnd, Written, Drained) are O(1), allocation-free and
// lock-free, read only the wheel's coarse clock and cost a few nanoseconds;
// within one tick most are a clock load, a load and a compare.
//
// Each method that reads the clock has a variant that takes the time
// instead (NewAt, ActivityAt, BytesInAt, ReceivedAt, FrameStartAt,
// WrittenAt), for callers that already know it: a value from the wheel's
// Now, or an exact one from its Elapsed. An event loop that reads Elapsed
// once per event and passes it on gets deadlines that run from the exact
// instant of each event, and spares the wheel keeping its coarse clock
// fresh for it (see wheel.Timer.ResetFrom). The times passed for one
// Tracker must not run backwards, with one exception: Activity, BytesIn and
// Received (and their At variants) may be called from several goroutines
// at once (a Conn's reader and writer, say), whose clock reads and stores
// interleave, so each stamp keeps the latest time it was given and ignores
// an earlier one that arrives late (but for a coarse time below an exact
// one, which may be the later event: see stamp).
//
// Timers: one policy timer carries the idle, read-silence, keepalive,
// handshake and max-age timeouts; it is armed only by New and by its own
// callback, so that per-packet calls only store a time stamp and never touch
// the wheel. Frame and write-stall deadlines each have a timer of their own
// (initialized only when configured), armed lazily by FrameStart and Written;
// see docs/design.md for why three and not one.
//
// Never early: every deadline is a stamp (a value returned by the wheel's
// Now or Elapsed) plus a duration, and a timer is armed for it with
// ResetFrom(stamp, duration), which the wheel never fires early even when
// its coarse clock was stale at the stamp. A close, probe or drain happens
// only in the callback of a timer armed for exactly that deadline; a
// callback never decides that something is due by comparing coarse times,
// which would be early by as much as the clock was stale.
//
// Ownership: lastAct, lastIn, frame, write, handshakeAt, state and due are
// shared: written by per-packet calls, New, Stop and callbacks, read by the
// callbacks, and accessed only atomically. frame.armed and write.armed say
// which party owns the arming of that timer (see deadline). armedFrom and
// armedDur, and the state in more (see policies), belong to the policy
// callback, which runs one at a time on the wheel's goroutine (New writes
// them before the Tracker is published). Everything else is written by New
// and only read afterwards. The fields a per-packet call touches come
// first, to share a cache line.
//
// Memory: a Tracker is 168 bytes (the runtime's 176-byte size class) and a
// closure for its policy timer, 192 bytes with idle and handshake timeouts
// alone; a frame or a write-stall timeout adds a timedDeadline and its
// closure each (96 bytes), and any of read silence, keepalive and max age
// one policies (96 bytes). TestTracker_BytesPerNew holds these figures.
type Tracker struct {
	w       *wheel.Wheel
	lastAct atomic.Int64   // wheel time of the last Activity
	lastIn  atomic.Int64   // wheel time of the last inbound byte
	frame   *timedDeadline // Config.FrameTimeout; nil when off
	write   *timedDeadline // Config.WriteStallTimeout; nil when off
	state   atomic.Uint32
	due     atomic.Int64 // the deadline the close was for; published by state

	handshakeAt atomic.Int64 // absolute handshake deadline; 0: done or off
	opened      int64        // wheel time of New: the stamp of handshake and max age
	idleDur     int64        // Config.IdleTimeout
	onClose     func(Reason) // Hooks.Close
	more        *policies    // read silence, keepalive, max age; nil when all are off

	// The policy timer is armed with ResetFrom(armedFrom, armedDur); when
	// it fires, a deadline with that stamp and no longer a duration has
	// passed. armedDur < 0 in New: nothing has fired.
	armedFrom, armedDur int64

	policy wheel.Timer
}

// policies holds what read silence, keepalive and max age need, allocated
// only when one of them is configured, so that a connection with an idle
// timeout alone does not carry it. New writes the durations and hooks;
// probes, probeAt, probeExact and draining belong to the policy callback
// (see Tracker).
type policies struct {
	silenceDur int64 // Config.ReadSilenceTimeout
	kaTime     int64 // Config.KeepaliveTime
	kaWait     int64 // Config.KeepaliveTimeout
	ageDur     int64 // max age drawn for this connection; 0: off
	grace      int64 // Config.MaxAgeGrace
	probe      func()
	drain      func()

	probeAt    int64 // coarse wheel time at which the last probe was sent
	probeExact int64 // the exact time it was sent, which its timeout runs from
	count      int32 // KeepaliveCount, defaulted to 1
	probes     int32 // unanswered probes sent
	draining   bool  // Drain has been called
}

// timedDeadline is a deadline with the timer that enforces it, allocated
// only when its timeout is configured, so that a connection without frame
// or write-stall deadlines does not carry their timers.
type timedDeadline struct {
	deadline
	timer wheel.Timer
}

// deadline is an absolute deadline that a per-packet event starts (a
// frame's first byte, queued output) and another clears, enforced by a
// timer of its own.
//
// Ownership: at and armed are shared and accessed only atomically; dur is
// written by New. at is written by the event methods (one goroutine at a
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

// Values of Tracker.state: stateOpen, stateStopped, or a Reason (the close).
const (
	stateOpen    = 0
	stateStopped = math.MaxUint8 + 1
)

const never = math.MaxInt64

// New validates cfg and hooks and starts tracking a connection that opens
// now (the wheel's clock), with cfg's defaults filled in (see Config and
// Config.WithDefaults, whose probe is Hooks.Probe != nil). It returns an error wrapping ErrNegative,
// ErrKeepalive, ErrMaxAge, ErrNoEffect or ErrHook. New allocates the Tracker
// and arms at most one timer; it may be called from any goroutine.
func New(w *wheel.Wheel, cfg Config, hooks Hooks) (*Tracker, error) {
	if w == nil {
		panic("idle: New with nil wheel")
	}
	return NewAt(w, w.Now(), cfg, hooks)
}

// NewAt is New for a connection that opened at now, a value from the
// wheel's Now or Elapsed (see Tracker).
func NewAt(w *wheel.Wheel, now time.Duration, cfg Config, hooks Hooks) (*Tracker, error) {
	if w == nil {
		panic("idle: New with nil wheel")
	}
	cfg, err := cfg.run(uses{probe: hooks.Probe != nil, frames: true, handshake: true})
	if err != nil {
		return nil, err
	}
	if err := hooks.check(&cfg); err != nil {
		return nil, err
	}
	t := new(Tracker)
	t.start(w, &cfg, hooks, int64(now))
	return t, nil
}

func (h *Hooks) check(cfg *Config) error {
	if h.Close == nil {
		return fmt.Errorf("%w: Hooks.Close is nil", ErrHook)
	}
	if cfg.KeepaliveTime > 0 && h.Probe == nil {
		return fmt.Errorf("%w: Hooks.Probe is nil but KeepaliveTime is set", ErrHook)
	}
	return nil
}

// start initializes t from a validated cfg and arms the policy timer.
func (t *Tracker) start(w *wheel.Wheel, cfg *Config, hooks Hooks, now int64) {
	t.w = w
	// A deadline beyond the wheel's range is never reached; the wheel would
	// clamp its arming, whose firing would then prove nothing.
	if cfg.FrameTimeout > 0 && cfg.FrameTimeout < w.MaxDuration() {
		t.frame = &timedDeadline{deadline: deadline{dur: int64(cfg.FrameTimeout)}}
	}
	if cfg.WriteStallTimeout > 0 && cfg.WriteStallTimeout < w.MaxDuration() {
		t.write = &timedDeadline{deadline: deadline{dur: int64(cfg.WriteStallTimeout)}}
	}
	t.idleDur = int64(cfg.IdleTimeout)
	t.onClose = hooks.Close
	t.opened = now
	t.lastAct.Store(now)
	t.lastIn.Store(now)
	if cfg.HandshakeTimeout > 0 {
		t.handshakeAt.Store(now + int64(cfg.HandshakeTimeout))
	}
	if cfg.ReadSilenceTimeout > 0 || cfg.KeepaliveTime > 0 || cfg.MaxAge > 0 {
		p := &policies{
			silenceDur: int64(cfg.ReadSilenceTimeout),
			kaTime:     int64(cfg.KeepaliveTime),
			kaWait:     int64(cfg.KeepaliveTimeout),
			grace:      int64(cfg.MaxAgeGrace),
			probe:      hooks.Probe,
			drain:      hooks.Drain,
			count:      int32(min(max(cfg.KeepaliveCount, 1), math.MaxInt32)),
		}
		if cfg.MaxAge > 0 {
			p.ageDur = drawAge(cfg)
		}
		t.more = p
	}
	t.policy.Init(w, t.onPolicy)
	if t.frame != nil {
		t.frame.timer.Init(w, t.onFrame)
	}
	if t.write != nil {
		t.write.timer.Init(w, t.onWrite)
	}
	t.armedDur = -1 // nothing has fired: nothing is due yet
	t.runPolicy(now)
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

// Activity records application activity now: it restarts the idle timeout.
// Call it for whatever counts as use of the connection (a request, a
// response, a stream message), not for keepalive answers. O(1), no
// allocation, no lock; may be called from any goroutine.
func (t *Tracker) Activity() { t.ActivityAt(t.w.Now()) }

// ActivityAt is Activity at now, a value from the wheel's Now or Elapsed.
func (t *Tracker) ActivityAt(now time.Duration) { t.stamp(&t.lastAct, now) }

// BytesIn records that inbound bytes arrived now: it restarts the
// read-silence timeout, answers outstanding keepalive probes and postpones
// the next one. It does not count as activity (see Received). O(1), no
// allocation, no lock; may be called from any goroutine.
func (t *Tracker) BytesIn() { t.BytesInAt(t.w.Now()) }

// BytesInAt is BytesIn at now, a value from the wheel's Now or Elapsed.
func (t *Tracker) BytesInAt(now time.Duration) { t.stamp(&t.lastIn, now) }

// Received is BytesIn and Activity together, with one clock read: inbound
// bytes that count as application activity. Same cost and rules.
func (t *Tracker) Received() { t.ReceivedAt(t.w.Now()) }

// ReceivedAt is Received at now, a value from the wheel's Now or Elapsed.
func (t *Tracker) ReceivedAt(now time.Duration) {
	t.stamp(&t.lastIn, now)
	t.stamp(&t.lastAct, now)
}

// stamp moves a forward to now, never back: a caller that read the clock
// before another goroutine's stamp may store after it, and the later event
// must win, or a timeout would run from an earlier one and fire early. One
// earlier value does win: a coarse stamp (a multiple of the tick, from
// wheel.Now) below an exact one, since the coarse clock may lag the exact
// one by more than their difference, and the wheel keeps a coarse stamp's
// timeout from firing early however stale it was (wheel.Timer.ResetFrom);
// so a Tracker stamped from both clocks, one after the other, runs from
// the last stamp. In the common case, a already holding now (stamps from
// the coarse clock change once per tick), stamp costs a load and a compare
// and writes nothing; moving a costs a compare-and-swap where a plain store
// would have been, retried only if another stamp lands in between.
func (t *Tracker) stamp(a *atomic.Int64, now time.Duration) {
	n := int64(now)
	for {
		old := a.Load()
		if old == n || old > n && !t.coarseBelowExact(n, old) {
			return
		}
		if a.CompareAndSwap(old, n) {
			return
		}
	}
}

// coarseBelowExact reports whether stamp n < old is coarse and old exact:
// n may then be the later event (see stamp).
func (t *Tracker) coarseBelowExact(n, old int64) bool {
	tick := int64(t.w.Tick())
	return n%tick == 0 && old%tick != 0
}

// FrameStart records that the first byte of a frame arrived: unless a frame
// is already in flight, it starts the frame deadline, FrameTimeout from now.
// Calling it again before FrameEnd does not extend the deadline, so it may
// be called for every partial read. Nothing happens if FrameTimeout is 0.
// O(1), no allocation, no lock; touches the wheel at most about once per
// FrameTimeout. Call FrameStart and FrameEnd from one goroutine at a time
// (the connection's reader).
func (t *Tracker) FrameStart() {
	if t.frame != nil {
		t.begin(t.frame, int64(t.w.Now()))
	}
}

// FrameStartAt is FrameStart at now, a value from the wheel's Now or
// Elapsed.
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

// HandshakeDone clears the handshake deadline: call it when the TLS
// handshake or the first frame completes. O(1); any goroutine.
func (t *Tracker) HandshakeDone() {
	if t.handshakeAt.Load() != 0 {
		t.handshakeAt.Store(0)
	}
}

// Written records that outbound bytes are queued and not yet drained:
// unless output is already pending, it starts the write-stall deadline,
// WriteStallTimeout from now. Nothing happens if WriteStallTimeout is 0.
// O(1), no allocation, no lock. Call Written and Drained from one goroutine
// at a time (the connection's writer).
func (t *Tracker) Written() {
	if t.write != nil {
		t.begin(t.write, int64(t.w.Now()))
	}
}

// WrittenAt is Written at now, a value from the wheel's Now or Elapsed.
func (t *Tracker) WrittenAt(now time.Duration) {
	if t.write != nil {
		t.begin(t.write, int64(now))
	}
}

// Drained records that all queued output has been written, clearing the
// write-stall deadline. O(1); same rules as Written.
func (t *Tracker) Drained() {
	if t.write != nil && t.write.at.Load() != 0 {
		t.write.at.Store(0)
	}
}

// begin starts deadline d at now unless it is off or running, and arms its
// timer if the timer is free. A timer that is not free is armed for an
// earlier deadline (deadlines only grow), and its callback re-arms it for
// this one.
func (t *Tracker) begin(d *timedDeadline, now int64) {
	if d.at.Load() != 0 {
		return
	}
	at := now + d.dur
	d.at.Store(at)
	if d.armed.Load() == 0 && d.armed.CompareAndSwap(0, at) {
		t.arm(&d.timer, at-d.dur, d.dur)
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
// keepalive, the exact time of the last probe plus the timeout), and false
// while the tracker is open or after Stop. A timeout never fires before its
// deadline, so wheel.Elapsed minus Due is how late the close came (at least
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

// arm sets tm to fire d after the instant the wheel's clock read from,
// unless the tracker has ended. The check after ResetFrom pairs with Stop
// and close, which change state before stopping the timers: either they see
// this arming, or this sees their state.
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

// onPolicy is the policy timer's callback.
func (t *Tracker) onPolicy() {
	if t.state.Load() != stateOpen {
		return
	}
	t.runPolicy(int64(t.w.Now()))
}

// fired reports whether the policy timer's firing proves that the deadline
// d after stamp from has passed: the timer was armed with
// ResetFrom(armedFrom, armedDur), so any deadline with the same stamp and
// no longer a duration is behind us, however stale the clock was at the
// stamp. A deadline that looks due on the coarse clock but is not proven
// due this way is re-armed for: ResetFrom on a past deadline fires on the
// next tick.
func (t *Tracker) fired(from, d int64) bool {
	return from == t.armedFrom && d <= t.armedDur
}

// earliest collects the policy deadlines still to come and keeps the first.
type earliest struct {
	from, d, at int64 // at: from+d, saturated
}

// add considers the deadline d after from. On a tie the first added wins,
// so deadlines are added in priority order.
func (e *earliest) add(from, d int64) {
	at := from + d
	if at < from {
		at = never
	}
	if at < e.at {
		*e = earliest{from: from, d: d, at: at}
	}
}

// runPolicy closes the connection, sends a probe or drains it for every
// deadline the firing proves due, and re-arms the policy timer for the
// earliest deadline to come. When several are due at once, the first in this
// order wins: handshake, dead peer, idle, keepalive, max age (so no probe is
// sent on a connection that is closing anyway). now is the wheel's clock,
// read before the stamps, so a byte arriving meanwhile is stamped no earlier
// than now. Runs on the wheel's goroutine (or in New).
func (t *Tracker) runPolicy(now int64) {
	next := earliest{at: never}
	if at := t.handshakeAt.Load(); at != 0 {
		if t.fired(t.opened, at-t.opened) {
			t.close(ReasonHandshake, at)
			return
		}
		next.add(t.opened, at-t.opened)
	}
	in := t.lastIn.Load()
	p := t.more
	if p != nil && p.silenceDur > 0 {
		d := p.silenceDur
		if t.fired(in, d) {
			t.close(ReasonDeadPeer, in+d)
			return
		}
		next.add(in, d)
	}
	if d := t.idleDur; d > 0 {
		act := t.lastAct.Load()
		if t.fired(act, d) {
			t.close(ReasonIdle, act+d)
			return
		}
		next.add(act, d)
	}
	if p == nil {
		t.rearm(&next)
		return
	}
	if ka := p.kaTime; ka > 0 {
		if p.probes > 0 && in >= p.probeAt {
			p.probes = 0 // answered
		}
		// A probe has two times: its coarse stamp probeAt, which answers
		// (stamped either way, and never before it) are compared with, and
		// the exact time it was sent, which its deadlines run from. An
		// exact time names one instant, while a coarse stamp is shared by
		// everything stamped while its tick was on the clock, an answer
		// included, so a firing armed from the exact time proves nothing
		// about a deadline stamped probeAt, and fired never mistakes one
		// for the other. Armed from an exact time, the probe's timers fire
		// at their tick, with neither slack nor hold-back
		// (docs/design.md, "Exact instants").
		from, d := in, ka // the next probe
		if p.probes > 0 {
			from, d = p.probeExact, p.kaWait // the answer to the last one
		}
		exact := int64(-1) // read once, when needed
		if t.fired(from, d) {
			if p.probes >= p.count {
				t.close(ReasonKeepalive, from+d)
				return
			}
			exact = t.exactAfter(now)
			p.probes++
			p.probeAt, p.probeExact = now, exact
			p.probe()
			from, d = exact, p.kaWait
		}
		next.add(from, d)
		if p.probes > 0 {
			// An answer arriving from now on is stamped no earlier than
			// now, and makes the next probe due KeepaliveTime after it:
			// wake by then to notice (from the exact time, read after
			// now, so later by at most the read: see above).
			if exact < 0 {
				exact = t.exactAfter(now)
			}
			next.add(exact, ka)
		}
	}
	if p.ageDur != 0 {
		d := p.ageDur
		if !p.draining {
			if t.fired(t.opened, d) {
				if p.grace == 0 {
					t.close(ReasonMaxAge, t.opened+d)
					return
				}
				p.draining = true
				if p.drain != nil {
					p.drain()
				}
			} else {
				next.add(t.opened, d)
			}
		}
		if p.draining {
			d = int64(satAdd(time.Duration(d), time.Duration(p.grace)))
			if t.fired(t.opened, d) {
				t.close(ReasonMaxAge, t.opened+d)
				return
			}
			next.add(t.opened, d)
		}
	}
	t.rearm(&next)
}

// rearm arms the policy timer for next, the earliest policy deadline to
// come, unless the tracker has ended. On the wheel's goroutine (or in New).
func (t *Tracker) rearm(next *earliest) {
	// A deadline beyond the wheel's range (MaxDuration after its start:
	// 69 years at a 1 ms tick) is never reached: the wheel would clamp the
	// arming, and its firing would prove nothing.
	if t.state.Load() != stateOpen || next.at >= int64(t.w.MaxDuration()) {
		return
	}
	t.armedFrom, t.armedDur = next.from, next.d
	t.arm(&t.policy, next.from, next.d)
}

// exactAfter returns the wheel's exact time, read now, which is no earlier
// than now, a value from its Now. The wheel's goroutine calls it only when
// a probe is outstanding: about 60 ns, once per policy firing.
func (t *Tracker) exactAfter(now int64) int64 {
	return max(int64(t.w.Elapsed()), now)
}

// onFrame is the frame timer's callback.
func (t *Tracker) onFrame() {
	t.onDeadline(t.frame, ReasonFrameDeadline)
}

// onWrite is the write-stall timer's callback.
func (t *Tracker) onWrite() {
	t.onDeadline(t.write, ReasonWriteStall)
}

// onDeadline handles the firing of d's timer: it closes with r if the
// deadline running is the one the timer was armed for, re-arms the timer
// for the deadline running if it is another (a later frame or write), and
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
