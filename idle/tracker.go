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
// Timers: one policy timer carries the idle, read-silence, keepalive,
// handshake and max-age timeouts; it is armed only by New and by its own
// callback, which reads the last-activity times and re-arms at the earliest
// instant anything could fall due, so that per-packet calls only store a
// time and never touch the wheel. Frame and write-stall deadlines each have a
// timer of their own (initialized only when configured), armed lazily by
// FrameStart and Written; see docs/design.md for why three and not one.
//
// Ownership: lastAct, lastIn, frameAt, writeAt, handshakeAt and state are
// shared: written by per-packet calls, New, Stop and callbacks, read by the
// callbacks, and accessed only atomically. probes, probeAt and draining
// belong to the callbacks, which run one at a time on the wheel's goroutine
// (New writes them before the Tracker is published). Everything else is
// written by New and only read afterwards. The fields a per-packet call
// touches come first, to share one cache line.
type Tracker struct {
	w        *wheel.Wheel
	lastAct  atomic.Int64 // wheel time of the last Activity
	lastIn   atomic.Int64 // wheel time of the last inbound byte
	frameAt  atomic.Int64 // absolute frame deadline; 0: no frame in flight
	writeAt  atomic.Int64 // absolute write-stall deadline; 0: output drained
	frameDur int64        // Config.FrameTimeout
	writeDur int64        // Config.WriteStallTimeout
	state    atomic.Uint32
	count    int32 // KeepaliveCount, defaulted to 1

	handshakeAt atomic.Int64 // absolute handshake deadline; 0: done or off
	idleDur     int64        // Config.IdleTimeout
	silenceDur  int64        // Config.ReadSilenceTimeout
	kaTime      int64        // Config.KeepaliveTime
	kaWait      int64        // Config.KeepaliveTimeout
	ageAt       int64        // absolute max-age instant; 0: off
	grace       int64        // Config.MaxAgeGrace
	hooks       Hooks

	probeAt  int64 // when the last probe was sent
	probes   int32 // unanswered probes sent
	draining bool  // Drain has been called

	policy, frame, write wheel.Timer
}

// Values of Tracker.state: stateOpen, stateStopped, or a Reason (the close).
const (
	stateOpen    = 0
	stateStopped = math.MaxUint8 + 1
)

const never = math.MaxInt64

// New validates cfg and hooks and starts tracking a connection that opens
// now (the wheel's clock). It returns an error wrapping ErrNegative,
// ErrKeepalive, ErrMaxAge, ErrNoEffect or ErrHook. New allocates the Tracker
// and arms at most one timer; it may be called from any goroutine.
func New(w *wheel.Wheel, cfg Config, hooks Hooks) (*Tracker, error) {
	if w == nil {
		panic("idle: New with nil wheel")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := hooks.check(&cfg); err != nil {
		return nil, err
	}
	t := new(Tracker)
	t.start(w, &cfg, hooks)
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
func (t *Tracker) start(w *wheel.Wheel, cfg *Config, hooks Hooks) {
	t.w = w
	t.frameDur = int64(cfg.FrameTimeout)
	t.writeDur = int64(cfg.WriteStallTimeout)
	t.count = int32(min(max(cfg.KeepaliveCount, 1), math.MaxInt32))
	t.idleDur = int64(cfg.IdleTimeout)
	t.silenceDur = int64(cfg.ReadSilenceTimeout)
	t.kaTime = int64(cfg.KeepaliveTime)
	t.kaWait = int64(cfg.KeepaliveTimeout)
	t.grace = int64(cfg.MaxAgeGrace)
	t.hooks = hooks
	now := int64(w.Now())
	t.lastAct.Store(now)
	t.lastIn.Store(now)
	if cfg.HandshakeTimeout > 0 {
		t.handshakeAt.Store(now + int64(cfg.HandshakeTimeout))
	}
	if cfg.MaxAge > 0 {
		t.ageAt = now + int64(cfg.MaxAge-cfg.MaxAgeJitter) + jitter(cfg.Jitter, 2*int64(cfg.MaxAgeJitter)+1)
	}
	t.policy.Init(w, t.onPolicy)
	if cfg.FrameTimeout > 0 {
		t.frame.Init(w, t.onFrame)
	}
	if cfg.WriteStallTimeout > 0 {
		t.write.Init(w, t.onWrite)
	}
	if next := t.nextPolicy(now); next != never {
		t.policy.Reset(time.Duration(next - now))
	}
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
func (t *Tracker) Activity() {
	now := int64(t.w.Now())
	if t.lastAct.Load() != now {
		t.lastAct.Store(now)
	}
}

// BytesIn records that inbound bytes arrived now: it restarts the
// read-silence timeout, answers outstanding keepalive probes and postpones
// the next one. It does not count as activity (see Received). O(1), no
// allocation, no lock; may be called from any goroutine.
func (t *Tracker) BytesIn() {
	now := int64(t.w.Now())
	if t.lastIn.Load() != now {
		t.lastIn.Store(now)
	}
}

// Received is BytesIn and Activity together, with one clock read: inbound
// bytes that count as application activity. Same cost and rules.
func (t *Tracker) Received() {
	now := int64(t.w.Now())
	if t.lastIn.Load() != now {
		t.lastIn.Store(now)
	}
	if t.lastAct.Load() != now {
		t.lastAct.Store(now)
	}
}

// FrameStart records that the first byte of a frame arrived: unless a frame
// is already in flight, it arms the frame deadline FrameTimeout from now.
// Calling it again before FrameEnd does not extend the deadline, so it may
// be called for every partial read. Nothing happens if FrameTimeout is 0.
// O(1), no allocation, no lock; touches the wheel at most once per
// FrameTimeout. Call FrameStart and FrameEnd from one goroutine at a time
// (the connection's reader).
func (t *Tracker) FrameStart() {
	if t.frameDur == 0 || t.frameAt.Load() != 0 {
		return
	}
	t.frameAt.Store(int64(t.w.Now()) + t.frameDur)
	// A pending frame timer was armed for an earlier frame, so it is due
	// no later than this one: its callback will re-arm for this deadline.
	if !t.frame.Pending() {
		t.arm(&t.frame, time.Duration(t.frameDur))
	}
}

// FrameEnd records that the frame in flight is complete, clearing its
// deadline. The timer is left to lapse rather than stopped: re-arming it on
// the next frame is then usually free. O(1); same rules as FrameStart.
func (t *Tracker) FrameEnd() {
	if t.frameAt.Load() != 0 {
		t.frameAt.Store(0)
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
// unless output is already pending, it arms the write-stall deadline
// WriteStallTimeout from now. Nothing happens if WriteStallTimeout is 0.
// O(1), no allocation, no lock. Call Written and Drained from one goroutine
// at a time (the connection's writer).
func (t *Tracker) Written() {
	if t.writeDur == 0 || t.writeAt.Load() != 0 {
		return
	}
	t.writeAt.Store(int64(t.w.Now()) + t.writeDur)
	if !t.write.Pending() {
		t.arm(&t.write, time.Duration(t.writeDur))
	}
}

// Drained records that all queued output has been written, clearing the
// write-stall deadline. O(1); same rules as Written.
func (t *Tracker) Drained() {
	if t.writeAt.Load() != 0 {
		t.writeAt.Store(0)
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
	if t.frameDur != 0 {
		t.frame.Stop()
	}
	if t.writeDur != 0 {
		t.write.Stop()
	}
}

// arm resets tm unless the tracker has ended. The check after Reset pairs
// with Stop and close, which change state before stopping the timers: either
// they see this arming, or this sees their state.
func (t *Tracker) arm(tm *wheel.Timer, d time.Duration) {
	tm.Reset(d)
	if t.state.Load() != stateOpen {
		tm.Stop()
	}
}

// close ends the tracker with reason r and delivers it, once.
func (t *Tracker) close(r Reason) {
	if !t.state.CompareAndSwap(stateOpen, uint32(r)) {
		return
	}
	t.stopTimers()
	t.hooks.Close(r)
}

// onPolicy is the policy timer's callback: it acts on whatever is due and
// re-arms for the earliest instant something may next fall due.
func (t *Tracker) onPolicy() {
	if t.state.Load() != stateOpen {
		return
	}
	now := int64(t.w.Now())
	next := t.nextPolicy(now)
	if t.state.Load() != stateOpen || next == never {
		return
	}
	t.arm(&t.policy, time.Duration(next-now))
}

// nextPolicy closes the connection or sends a probe if due at now, and
// returns when the policy timer must next fire (never: not at all). When
// several timeouts are due at once, the first in this order wins: handshake,
// dead peer, idle, keepalive, max age (so no probe is sent on a connection
// that is closing anyway). It reads the clock before the
// last-activity times, so a byte arriving meanwhile is stamped no earlier
// than now. Runs on the wheel's goroutine (or in New).
func (t *Tracker) nextPolicy(now int64) int64 {
	next := int64(never)
	if at := t.handshakeAt.Load(); at != 0 {
		if now >= at {
			t.close(ReasonHandshake)
			return never
		}
		next = min(next, at)
	}
	in := t.lastIn.Load()
	if d := t.silenceDur; d > 0 {
		at := in + d
		if now >= at {
			t.close(ReasonDeadPeer)
			return never
		}
		next = min(next, at)
	}
	if d := t.idleDur; d > 0 {
		at := t.lastAct.Load() + d
		if now >= at {
			t.close(ReasonIdle)
			return never
		}
		next = min(next, at)
	}
	if ka := t.kaTime; ka > 0 {
		wait := t.kaWait
		if t.probes > 0 && in >= t.probeAt {
			t.probes = 0 // answered
		}
		at := in + ka
		if t.probes > 0 {
			at = t.probeAt + wait
		}
		if now >= at {
			if t.probes >= t.count {
				t.close(ReasonKeepalive)
				return never
			}
			t.probes++
			t.probeAt = now
			t.hooks.Probe()
			at = now + wait
		}
		if t.probes > 0 {
			// An answer arriving from now on makes the next probe due
			// KeepaliveTime after it: wake by then to notice.
			at = min(at, now+ka)
		}
		next = min(next, at)
	}
	if t.ageAt != 0 {
		at := t.ageAt
		if now >= at {
			grace := t.grace
			if now >= at+grace {
				t.close(ReasonMaxAge)
				return never
			}
			if !t.draining {
				t.draining = true
				if t.hooks.Drain != nil {
					t.hooks.Drain()
				}
			}
			at += grace
		}
		next = min(next, at)
	}
	return next
}

// onFrame is the frame timer's callback.
func (t *Tracker) onFrame() {
	t.onDeadline(&t.frameAt, &t.frame, ReasonFrameDeadline)
}

// onWrite is the write-stall timer's callback.
func (t *Tracker) onWrite() {
	t.onDeadline(&t.writeAt, &t.write, ReasonWriteStall)
}

// onDeadline closes with r if the deadline in at has passed, and otherwise
// re-arms tm for it. The deadline may belong to a later frame (or write)
// than the one the timer was armed for; deadlines only grow, so a timer
// armed by anyone for any of them is never late for the current one.
func (t *Tracker) onDeadline(at *atomic.Int64, tm *wheel.Timer, r Reason) {
	if t.state.Load() != stateOpen {
		return
	}
	now := int64(t.w.Now())
	d := at.Load()
	switch {
	case d == 0:
		// Cleared: let the timer lapse; the next FrameStart/Written arms it.
	case now >= d:
		t.close(r)
	default:
		t.arm(tm, time.Duration(d-now))
	}
}
