package retransmit

import (
	"sync"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// Hooks are the Tracker's calls back into the server. Retransmit and
// GiveUp are required; Sample is optional.
type Hooks struct {
	// Retransmit asks the server to resend seq; attempt counts the
	// retransmissions of seq so far, this one included (1 for the first),
	// and is what an ack may echo to AckedAttempt. It runs on the wheel's
	// goroutine (or wherever wheel.WithExecutor sends callbacks), with no
	// lock of the Tracker held, and must not block: queue the write on the
	// connection's event loop. It may call any Tracker method.
	Retransmit func(seq uint64, attempt int)
	// GiveUp delivers the close reason, a *GiveUpError, once, after which
	// the Tracker is stopped. It runs like Retransmit.
	GiveUp func(err error)
	// Sample, if set, receives every RTT sample the Tracker feeds its
	// Estimator (for metrics). It runs on the goroutine that called the ack
	// method, after the Tracker's lock is released.
	Sample func(rtt time.Duration)
}

// entry is one outstanding message, stored at ring[seq & mask].
type entry struct {
	firstNanos int64  // time of the first transmission: Sent's now
	lastNanos  int64  // time of the latest transmission: Sent's now, or the expiry's
	retx       uint32 // retransmissions so far
	acked      bool
}

// Tracker follows the outstanding messages of one connection and runs
// RFC 6298 section 5's retransmission timer on one wheel.Timer: the timer
// runs exactly while something is outstanding, is started by Sent when
// nothing was, restarted by an ack that acknowledges the oldest outstanding
// message, stopped when nothing is left, and on expiry retransmits the
// oldest outstanding message and backs the RTO off. It gives up after
// MaxRetransmits retransmissions of one message or GiveUpAfter without an
// ack for it. Create one with NewTracker, or embed it and call Init.
//
// Sequence numbers are consecutive: the first Sent picks any uint64, each
// later one must be the previous plus one. Acks may arrive in any order,
// selective (Acked) or cumulative (AckedThrough).
//
// Concurrency. Every method but Next may be called from any goroutine; the
// intended caller is the connection's event loop, and the only other party
// is the timer's expiry on the wheel's goroutine. A per-Tracker mutex,
// uncontended but in the instant an expiry races an ack, serializes the two
// (docs/perf.md has the cost of a Sent and its ack); no callback runs under
// it. Next reads without the mutex (see Next).
//
// Costs. Sent, Acked, AckedAttempt and AckedThrough are O(1) amortized
// (AckedThrough is linear in the messages it acknowledges) and allocate
// nothing once the ring has grown to the connection's working window; the
// ring starts at 8 entries and doubles up to Window.
//
// Timestamps. Every now must be a reading of this Tracker's wheel
// (Wheel.Now), taken at the event or once for a batch of events, as an
// event loop does, and non-decreasing across calls. The retransmission
// timer is armed from that now (wheel.Timer.ResetFrom). The expiry reads
// the clock once, arms the timer from it and records it as the
// retransmission's send time, which an AckedAttempt sample is measured
// from: an ack read after the retransmission was sent has a later now, so
// its sample is never negative (and lost).
type Tracker struct {
	// Written by Init and only read afterwards (timer: its Init; arming
	// and stopping it happen under mu).
	timer wheel.Timer
	w     *wheel.Wheel
	hooks Hooks
	cfg   resolved

	// Everything below mu is guarded by mu: the caller's methods and the
	// timer's expiry, on the wheel's goroutine, take it.
	mu          sync.Mutex
	est         Estimator
	ring        []entry // len is a power of two
	head        uint64  // lowest unacked seq; == next when nothing is outstanding
	next        uint64  // seq the next Sent must carry, 1 before it; only Sent writes it, so Next reads it without mu
	outstanding int     // unacked messages in [head, next)
	retransmits uint64
	armedFirst  int64 // see armedGiveUp
	acked       uint64
	// The flags together, not between the words: 16 bytes less padding.
	started     bool // a Sent has fixed head and next
	stopped     bool
	armedGiveUp bool // the timer is armed for the give-up deadline of the message first sent at armedFirst
}

// NewTracker returns a Tracker on w. See Init.
func NewTracker(w *wheel.Wheel, cfg Config, hooks Hooks) (*Tracker, error) {
	t := &Tracker{}
	if err := t.Init(w, cfg, hooks); err != nil {
		return nil, err
	}
	return t, nil
}

// Init prepares a Tracker embedded in a larger struct. A zero Granularity
// means w.Tick(). It fails with an error wrapping ErrInvalidConfig if cfg is
// invalid, w is nil or Retransmit or GiveUp is nil. Call it once, before
// sharing t; it allocates the initial ring and the timer's callback.
func (t *Tracker) Init(w *wheel.Wheel, cfg Config, hooks Hooks) error {
	if w == nil {
		return invalid("nil wheel")
	}
	if hooks.Retransmit == nil || hooks.GiveUp == nil {
		return invalid("Hooks.Retransmit and Hooks.GiveUp are required")
	}
	r, err := cfg.resolve(w.Tick())
	if err != nil {
		return err
	}
	t.w, t.hooks, t.cfg, t.head, t.next = w, hooks, r, 1, 1
	t.est.init(r)
	size := 8
	for size/2 >= r.window {
		size /= 2
	}
	t.ring = make([]entry, size)
	t.timer.Init(w, t.expire)
	return nil
}

// Sent records the first transmission of seq at now. It fails with
// ErrSequence unless seq is one more than the previous seq (any seq for the
// first call), with ErrWindowFull if Window sequence numbers are already
// outstanding (the oldest unacked one included), and with ErrStopped after
// the Tracker gave up or was stopped; a failed Sent records nothing. If
// nothing was outstanding it starts the timer for the RTO (or GiveUpAfter,
// if shorter). O(1), allocation-free once the ring has grown.
func (t *Tracker) Sent(seq uint64, now time.Duration) error {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return ErrStopped
	}
	if !t.started {
		t.head, t.next, t.started = seq, seq, true
	} else if seq != t.next {
		t.mu.Unlock()
		return ErrSequence
	}
	span := t.next - t.head
	if span >= uint64(t.cfg.window) {
		t.mu.Unlock()
		return ErrWindowFull
	}
	if span >= uint64(len(t.ring)) {
		t.grow()
	}
	t.ring[seq&uint64(len(t.ring)-1)] = entry{firstNanos: int64(now), lastNanos: int64(now)}
	t.next++
	t.outstanding++
	if t.outstanding == 1 {
		t.arm(int64(now))
	}
	t.mu.Unlock()
	return nil
}

// Next reports the seq the next Sent must carry, 1 before the first Sent
// (which may carry any). It reads without the mutex, so only the goroutine
// that calls Sent may call it, and only if Sent has no other caller. O(1).
func (t *Tracker) Next() uint64 { return t.next }

// grow doubles the ring, re-indexing the outstanding span.
func (t *Tracker) grow() {
	ring := make([]entry, 2*len(t.ring))
	oldMask, newMask := uint64(len(t.ring)-1), uint64(len(ring)-1)
	for s := t.head; s != t.next; s++ {
		ring[s&newMask] = t.ring[s&oldMask]
	}
	t.ring = ring
}

// arm (re)starts the timer for the current RTO, or for the time left until
// the oldest message has been outstanding GiveUpAfter, if sooner.
// Called with mu held and something outstanding.
//
// The give-up deadline is armed from the first send's stamp; expire gives
// up for time only when the timer fired for that deadline.
func (t *Tracker) arm(nowNanos int64) {
	d := t.est.rtoNanos()
	first := t.ring[t.head&uint64(len(t.ring)-1)].firstNanos
	if first+t.cfg.giveUpNanos-nowNanos <= d {
		t.armedGiveUp, t.armedFirst = true, first
		t.timer.ResetFrom(time.Duration(first), time.Duration(t.cfg.giveUpNanos))
		return
	}
	t.armedGiveUp = false
	t.timer.ResetFrom(time.Duration(nowNanos), time.Duration(d))
}

// Acked records a selective acknowledgement of seq at now and reports
// whether it acknowledged an outstanding message; acks of messages already
// acknowledged or never sent are ignored. An ack of a message that was never
// retransmitted yields an RTT sample (Karn's rule); AckedAttempt can also
// sample retransmitted ones. The timer is restarted only when seq is the
// oldest outstanding message, so acks of later messages cannot postpone
// the retransmission of a lost one; it is stopped when nothing is left.
// O(1) amortized, allocation-free.
func (t *Tracker) Acked(seq uint64, now time.Duration) bool {
	return t.ack(seq, -1, now)
}

// AckedAttempt is Acked for a protocol whose ack names which transmission
// it answers: attempt 0 is the first transmission, n the n-th
// retransmission (as passed to Hooks.Retransmit). The RTT is sampled
// when attempt is the latest transmission of seq, the only one whose send
// time the Tracker keeps; an ack naming an older one yields no sample. This
// departs from Karn's rule on purpose: the ack says which transmission it
// answers, so the sample is not ambiguous (see Tracker, Timestamps). A
// negative attempt counts as 0.
func (t *Tracker) AckedAttempt(seq uint64, attempt int, now time.Duration) bool {
	return t.ack(seq, max(attempt, 0), now)
}

// ack implements Acked (attempt -1) and AckedAttempt.
func (t *Tracker) ack(seq uint64, attempt int, now time.Duration) bool {
	t.mu.Lock()
	if t.stopped || seq-t.head >= t.next-t.head {
		t.mu.Unlock()
		return false
	}
	mask := uint64(len(t.ring) - 1)
	e := &t.ring[seq&mask]
	if e.acked {
		t.mu.Unlock()
		return false
	}
	e.acked = true
	t.outstanding--
	t.acked++
	rtt := time.Duration(-1)
	if attempt < 0 && e.retx == 0 || attempt >= 0 && uint32(attempt) == e.retx {
		rtt = now - time.Duration(e.lastNanos)
	}
	headMoved := seq == t.head
	if headMoved {
		for t.head != t.next && t.ring[t.head&mask].acked {
			t.head++
		}
	}
	t.acknowledged(rtt, headMoved, now)
	return true
}

// acknowledged ends an ack, called with mu held, which it releases: it
// feeds rtt (negative: no sample) to the Estimator and applies RFC 6298
// sections 5.2 and 5.3, stopping the timer when nothing is outstanding and
// restarting it when the oldest message was acknowledged; then it calls
// Hooks.Sample with no lock held.
func (t *Tracker) acknowledged(rtt time.Duration, headMoved bool, now time.Duration) {
	sampled := t.est.Sample(rtt)
	switch {
	case t.outstanding == 0:
		t.timer.Stop()
	case headMoved:
		t.arm(int64(now))
	}
	t.mu.Unlock()
	if sampled && t.hooks.Sample != nil {
		t.hooks.Sample(rtt)
	}
}

// AckedThrough records a cumulative acknowledgement of every message up to
// and including seq at now, and returns how many outstanding messages it
// acknowledged. An ack below every outstanding seq, or of a seq never sent,
// is ignored (returns 0), as TCP ignores an ACK for unsent data. One RTT
// sample is taken, from the highest newly acknowledged message that was
// never retransmitted: it was sent last, so its sample is the tightest.
// The timer is restarted if anything was acknowledged and something remains,
// stopped if nothing remains. O(messages acknowledged), allocation-free.
func (t *Tracker) AckedThrough(seq uint64, now time.Duration) int {
	t.mu.Lock()
	if t.stopped || seq-t.head >= t.next-t.head {
		t.mu.Unlock()
		return 0
	}
	mask := uint64(len(t.ring) - 1)
	n := 0
	rtt := time.Duration(-1)
	for ; t.head != seq+1; t.head++ {
		e := &t.ring[t.head&mask]
		if e.acked {
			continue
		}
		n++
		if e.retx == 0 {
			rtt = now - time.Duration(e.lastNanos)
		}
	}
	for t.head != t.next && t.ring[t.head&mask].acked {
		t.head++
	}
	t.outstanding -= n
	t.acked += uint64(n)
	t.acknowledged(rtt, n > 0, now)
	return n
}

// expire is the timer's callback, on the wheel's goroutine.
func (t *Tracker) expire() {
	t.mu.Lock()
	// A pending timer means an ack or Sent re-armed it after this firing
	// began: that arming's expiry will come. Nothing outstanding or closed:
	// the firing lost a race with the last ack or Stop.
	if t.stopped || t.outstanding == 0 || t.timer.Pending() {
		t.mu.Unlock()
		return
	}
	now := int64(t.w.Now())
	seq := t.head
	e := &t.ring[seq&uint64(len(t.ring)-1)]
	var limit error
	switch {
	case t.armedGiveUp && t.armedFirst == e.firstNanos:
		limit = ErrUnackedTimeout
	case int(e.retx) >= t.cfg.maxRetransmits:
		limit = ErrMaxRetransmits
	}
	if limit != nil {
		t.stopped = true
		err := &GiveUpError{Limit: limit, Seq: seq, Retransmits: int(e.retx),
			Unacked: time.Duration(now - e.firstNanos)}
		t.mu.Unlock()
		t.hooks.GiveUp(err)
		return
	}
	e.retx++
	e.lastNanos = now
	attempt := int(e.retx)
	t.retransmits++
	t.est.Backoff()
	t.arm(now)
	t.mu.Unlock()
	t.hooks.Retransmit(seq, attempt)
}

// Stop stops the timer and the Tracker: later Sent calls fail with
// ErrStopped, acks are ignored, and no expiry decides a retransmission or
// a give-up after Stop returns. A hook call decided just before Stop (its
// lock already released) may still run once, concurrently or after; a
// server that closes a connection should ignore such a late call. Stop
// reports whether it stopped a running Tracker (false: stopped already, or
// it gave up). It is idempotent and may be called from any goroutine,
// including a hook.
func (t *Tracker) Stop() bool {
	t.mu.Lock()
	stopped := !t.stopped
	t.stopped = true
	t.timer.Stop()
	t.mu.Unlock()
	return stopped
}

// Stats is a snapshot of a Tracker for metrics.
type Stats struct {
	SRTT, RTTVar, RTO, LatestRTT time.Duration
	Backoffs                     int    // RTO doublings since the last sample
	Outstanding                  int    // unacknowledged messages
	Samples                      uint64 // RTT samples taken
	Acked                        uint64 // messages acknowledged
	Retransmits                  uint64 // retransmissions requested
	Stopped                      bool
}

// Stats returns a snapshot of t. It takes t's mutex, so it may be called
// from any goroutine (and from a handler); O(1), allocation-free.
func (t *Tracker) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{
		SRTT: t.est.SRTT(), RTTVar: t.est.RTTVar(), RTO: t.est.RTO(), LatestRTT: t.est.LatestRTT(),
		Backoffs: t.est.Backoffs(), Outstanding: t.outstanding, Samples: t.est.Samples(),
		Acked: t.acked, Retransmits: t.retransmits, Stopped: t.stopped,
	}
}
