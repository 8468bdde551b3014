package wheel

import (
	"cmp"
	"math"
	"slices"
)

// The coarse clock, and why a timer armed from it never fires early.
//
// Reset reads the current tick from one atomic word instead of the system
// clock. The driver publishes each tick there while the clock is being read,
// and marks it stale when it stops keeping it (then the next reader reads the
// monotonic clock and publishes the tick itself). A reader of tick T knows
// that the time is at least T; it sets the deadline to T+1+ceil(d/tick), and
// the wheel fires tick k's coarse timers no earlier than k*tick plus a
// quarter tick of slack. That is on time if tick T+1 replaced T within the
// slack. When the driver runs late, T stays on the clock longer: when it
// replaces T it notes the excess, T's hold-back, and a timer armed from T is
// held back by it before it fires.
//
// The one idea that makes this work for any duration: a coarse state word
// records, next to its deadline, how many ticks before the deadline its
// clock reading was (ageCode), exactly up to 2^13 ticks and to a 4 000th of
// the duration beyond. So the wheel can name the ticks a deadline may have
// been computed from whatever its age, and holds it back by the largest
// hold-back among them (holdBacks keeps them at a resolution that falls with
// age, as a timing wheel does).

// Layout of Wheel.clock: the current coarse tick where a state word holds
// its deadline, and three flags in the low bits. Any flag sends a resetter
// down the slow path; without them, the clock word of tick T plus
// coarseDelta(n) is the state word of a deadline n ticks after T, but for
// the state's own flags.
const (
	clockStale   = 1 << 0 // the driver sleeps and does not keep the tick fresh
	clockStopped = 1 << 1 // Stop was called
	clockManual  = 1 << 2 // driven by a ManualClock, which has the exact time
	clockSlow    = clockStale | clockStopped | clockManual
	clockShift   = whenShift

	// lastTick is the clock's last tick: it stops there (after 2^41-2
	// ticks: 7 years at MinTick, 69 at 1 ms), and a deadline past it,
	// maxWhen, is never reached.
	lastTick = maxWhen - 1
)

// clockOf returns the clock word for tick t, without flags.
func clockOf(t uint64) uint64 { return t << clockShift }

// tickOf returns the tick of a time in nanoseconds since start, saturating
// at the clock's last tick.
func (w *Wheel) tickOf(nanos int64) uint64 {
	q, _ := w.divTick(uint64(max(nanos, 0)))
	return min(q, lastTick)
}

// publish makes the tick of now the coarse clock, unless a reader already
// published it, and notes how long the tick it replaces stayed visible.
// Driver only.
func (w *Wheel) publish(now int64) {
	k := w.tickOf(now)
	for {
		c := w.clock.Load()
		t := c >> clockShift
		if c&clockStale == 0 && t >= k {
			break
		}
		if w.clock.CompareAndSwap(c, clockOf(max(t, k))|c&clockStopped) {
			if c&clockStale == 0 {
				// Readers saw t until the swap, which came after now was
				// read: take the time again for the end of t's visibility.
				w.visibleUntil(t, max(now, w.sinceStart()))
			}
			break
		}
	}
	// Every tick below the one on the clock is over: its hold-back is known.
	w.holds.cover(w.clock.Load() >> clockShift)
}

// markStale tells readers that the tick will not be kept fresh: the driver
// is about to sleep past the next tick. Driver only.
func (w *Wheel) markStale() {
	for {
		c := w.clock.Load()
		if c&(clockStale|clockStopped) != 0 {
			return
		}
		if w.clock.CompareAndSwap(c, c|clockStale) {
			w.visibleUntil(c>>clockShift, w.sinceStart())
			return
		}
	}
}

// refresh handles a stale clock word c seen by a reader at now (nanoseconds
// since start): publish now's tick for the readers that follow, and wake the
// driver so it keeps the clock fresh while it is being read. It returns the
// tick. The driver notes how long the tick stayed when it next publishes.
func (w *Wheel) refresh(c uint64, now int64) uint64 {
	k := w.tickOf(now)
	for c&clockStale != 0 && c&clockStopped == 0 && c>>clockShift <= k {
		if w.clock.CompareAndSwap(c, clockOf(k)) {
			break
		}
		c = w.clock.Load()
	}
	w.wake()
	return k
}

// visibleUntil notes that tick t was the coarse clock until now. Readers
// assume the time was below (t+1)*tick + slack; if t stayed longer, timers
// armed from it are held back by the excess.
func (w *Wheel) visibleUntil(t uint64, now int64) {
	if extra := now - w.tickTime(t+1) - w.slackNanos; extra > 0 {
		w.holds.note(t, extra)
	}
}

// fireAt returns the earliest time, in nanoseconds since start, at which a
// timer in state s, whose deadline tick has come, may fire: the tick, for an
// exact deadline; for a coarse one, the tick plus the slack and the largest
// hold-back of the ticks it may have been computed from.
func (w *Wheel) fireAt(s uint64) int64 {
	when := s >> whenShift
	at := w.tickTime(when)
	if s&stateExact != 0 {
		return at
	}
	lo, hi := ageRange(when, s>>ageShift&(1<<ageBits-1))
	return satAdd(at, satAdd(w.slackNanos, w.holds.max(lo, hi)))
}

// holdBacks remembers the hold-back of every tick that has left the coarse
// clock, as the largest hold-back in each block of ticks: blocks of 1 tick
// for the last 4096 ticks, of 64 ticks for the last 4096 such blocks, and so
// on, by factors of 64, up to blocks of 2^36 ticks. A tick is looked up at
// the finest level that still covers it, so the answer for an old tick is
// the largest hold-back of the block around it, never less than its own,
// from a block about a 4000th to a 64th of its age. Only blocks with a
// hold-back are kept, in order (ticks are noted in order), so a wheel that
// is never late keeps nothing, and one late on every tick at most 4096
// blocks a level. Driver only.
type holdBacks struct {
	upTo   uint64 // every tick below upTo is over and has its hold-back noted
	levels [holdLevels][]holdBlock
	most   int64 // the largest hold-back ever noted, for ticks older than all levels
}

// holdBlock is the largest hold-back in the block of ticks index<<(6*level).
type holdBlock struct {
	index uint64
	extra int64
}

const (
	holdLevels = 7
	holdShift  = 6    // each level's blocks are 64 times the last's
	holdWindow = 4096 // blocks a level covers, back from the latest
)

// note records that tick t, which is over, was held extra nanoseconds.
// Ticks come in order (each leaves the clock after the one before), so a
// level's last block is t's or an earlier one.
func (h *holdBacks) note(t uint64, extra int64) {
	h.most = max(h.most, extra)
	for l := range h.levels {
		b := t >> (l * holdShift)
		lv := h.levels[l]
		if n := len(lv); n > 0 && lv[n-1].index >= b {
			lv[n-1].extra = max(lv[n-1].extra, extra)
			continue
		}
		// Blocks that left the window go from the front (for free: the
		// next append that outgrows the array copies only what is left).
		i := 0
		for i < len(lv) && lv[i].index+holdWindow <= b {
			i++
		}
		h.levels[l] = append(lv[i:], holdBlock{index: b, extra: extra})
	}
}

// cover records that every tick below t is over.
func (h *holdBacks) cover(t uint64) { h.upTo = max(h.upTo, t) }

// max returns the largest hold-back of the ticks lo to hi (never less than
// that of any of them), or math.MaxInt64 if one of them is not yet over.
func (h *holdBacks) max(lo, hi uint64) int64 {
	if hi >= h.upTo {
		return math.MaxInt64
	}
	last := h.upTo - 1
	for l := range h.levels {
		shift := l * holdShift
		blo, bhi := lo>>shift, hi>>shift
		if last>>shift-blo >= holdWindow {
			continue // lo's block is older than this level covers
		}
		lv := h.levels[l]
		i, _ := slices.BinarySearchFunc(lv, blo, func(b holdBlock, i uint64) int { return cmp.Compare(b.index, i) })
		var m int64
		for ; i < len(lv) && lv[i].index <= bhi; i++ {
			m = max(m, lv[i].extra)
		}
		return m
	}
	return h.most
}
