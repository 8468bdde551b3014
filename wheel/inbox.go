package wheel

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The inbox: how a resetter tells the driver about a timer it must look at
// (a new arming, an earlier deadline, a stop): cache-line-padded Treiber
// stacks, sharded by timer address. A push is one compare-and-swap, and the
// driver takes a whole stack with one swap (no ABA problem, no stub node).

type inboxShard struct {
	head atomic.Pointer[Timer]
	_    [56]byte
}

type inbox struct {
	shards []inboxShard
	shift  uint
}

// init sizes the inbox: two shards a processor, from 4 to 64.
func (in *inbox) init(procs int) {
	n := 4
	for n < 2*procs && n < 64 {
		n *= 2
	}
	in.shards = make([]inboxShard, n)
	in.shift = uint(64 - bits.TrailingZeros(uint(n)))
}

// push links t, whose queued bit the caller just set, on its shard.
func (in *inbox) push(t *Timer) {
	s := &in.shards[(uint64(uintptr(unsafe.Pointer(t)))*0x9E3779B97F4A7C15)>>in.shift]
	for {
		h := s.head.Load()
		t.qnext = h
		if s.head.CompareAndSwap(h, t) {
			return
		}
	}
}

// take removes every timer on shard i and returns them linked by qnext.
func (in *inbox) take(i int) *Timer { return in.shards[i].head.Swap(nil) }

// empty reports whether every shard was empty when looked at.
func (in *inbox) empty() bool {
	for i := range in.shards {
		if in.shards[i].head.Load() != nil {
			return false
		}
	}
	return true
}

// push puts t, whose queued bit the caller just set, on the inbox, and
// tells the driver what t needs as it stands now (an arming or Stop that
// landed meanwhile saw t queued and pushed nothing).
func (w *Wheel) push(t *Timer) {
	w.in.push(t)
	if s := t.state.Load(); s&statePending != 0 {
		w.wakeBefore(s >> whenShift)
	}
	w.queued()
}

// wakeBefore tells the driver that a timer on the inbox falls due at tick
// when: it lowers inMin, and wakes the driver if it plans to sleep past
// then. The driver stores sleepUntil before it reads inMin for the last
// time: one of the two sees the other.
func (w *Wheel) wakeBefore(when uint64) {
	for m := w.inMin.Load(); when < m; m = w.inMin.Load() {
		if w.inMin.CompareAndSwap(m, when) {
			break
		}
	}
	if v := w.sleepUntil.Load(); v != 0 && w.tickTime(when) < v {
		w.wake()
	}
}

// queued wakes the driver if it plans no wake-up within releaseDelay, to
// take in a timer waiting on the inbox.
func (w *Wheel) queued() {
	if w.sleepLong.Load() {
		w.pushWoke.Store(true)
		w.wake()
	}
}

// wake nudges a sleeping driver. It never blocks.
func (w *Wheel) wake() {
	if w.done != nil {
		w.park.wake()
	}
}
