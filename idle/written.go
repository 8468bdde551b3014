package idle

import (
	"sync/atomic"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// writeWatch is a Tracker's write-stall timeout: the writer's stamps, and
// the timer whose callback tells them to a WriteStall, which decides.
// Allocated only when WriteStallTimeout is set.
type writeWatch struct {
	// Written by the writer (Written stores it, Drained clears it), read by
	// the timer's callback; atomic.
	at atomic.Int64 // when the queued output stalls unless drained first: its first Written plus dur; 0: nothing queued

	// Who arms the timer: while armed is false the timer is free, and the
	// Written that starts a queue takes it and arms it; while it is true,
	// only the callback arms it, or frees it. Atomic.
	armed atomic.Bool

	// Owned by the timer's callback, on the wheel's goroutine.
	stall WriteStall

	// Written by Init and only read afterwards.
	dur   time.Duration // Config.WriteStallTimeout
	timer wheel.Timer
}

// Written records that outbound bytes are queued and not yet drained:
// unless output is already pending, it starts the write-stall deadline,
// WriteStallTimeout from now; it reads the clock only then. Nothing happens
// if WriteStallTimeout is 0. O(1), no allocation, no lock. Call Written and
// Drained from one goroutine at a time (the connection's writer).
func (t *Tracker) Written() {
	if t.write != nil && t.write.at.Load() == 0 {
		t.WrittenAt(t.w.Now())
	}
}

// WrittenAt is Written at now, a reading of the wheel's Now.
func (t *Tracker) WrittenAt(now time.Duration) {
	ww := t.write
	if ww == nil || ww.at.Load() != 0 {
		return
	}
	ww.at.Store(int64(now + ww.dur)) // > 0: now >= 0 and dur > 0
	if !ww.armed.Load() && ww.armed.CompareAndSwap(false, true) {
		t.arm(&ww.timer, int64(now), int64(ww.dur))
	}
}

// Drained records that all queued output has been written, clearing the
// write-stall deadline: a drain is the progress that a stalled peer does not
// make. The timer is left to lapse rather than stopped: re-arming it for the
// next output is then usually free. O(1); same rules as Written.
func (t *Tracker) Drained() {
	if t.write != nil && t.write.at.Load() != 0 {
		t.write.at.Store(0)
	}
}

// onWrite is the write-stall timer's callback. It tells the WriteStall what
// the writer's stamp says at now: nothing queued (Empty, and the timer is
// freed for the next Written to arm), or output queued since the stamp's
// Written; a stamp it has not seen is a new queue, whose clock starts at
// that Written (every queue before it drained: progress). Then it closes
// if the output has stalled, or re-arms for when it would.
//
// now is read before the stamp: a queue the stamp shows was pending at now
// or later, so a stall at now is one that really lasted the timeout. The
// drained count given to WriteStall never changes, since every drain ends
// a queue.
func (t *Tracker) onWrite() {
	if t.state.Load() != stateOpen {
		return
	}
	ww := t.write
	now := t.w.Now()
	at := ww.at.Load()
	if at == 0 {
		ww.stall.Empty()
		ww.armed.Store(false)
		// A Written that started a queue meanwhile found the timer taken:
		// take it back for that queue.
		if at = ww.at.Load(); at == 0 || !ww.armed.CompareAndSwap(false, true) {
			return
		}
	}
	if due, ok := ww.stall.Due(ww.dur); !ok || due != time.Duration(at) {
		ww.stall.Empty()
		ww.stall.Queued(time.Duration(at)-ww.dur, 0)
	}
	if ww.stall.Stalled(now, ww.dur) {
		t.close(ReasonWriteStall, at)
		return
	}
	t.arm(&ww.timer, at-int64(ww.dur), int64(ww.dur))
}
