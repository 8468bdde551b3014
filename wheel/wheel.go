// Package wheel is a lock-free hashed hierarchical timing wheel for timeouts
// that are reset far more often than they fire: the idle, keepalive and
// retransmission timers of network connections.
//
// A Reset of a pending timer costs a few nanoseconds, allocates nothing,
// takes no lock (unless it must wake the wheel's goroutine for an earlier
// deadline) and reads no system clock: it reads the wheel's coarse clock
// (the current tick), which the wheel's goroutine keeps fresh while timers
// are being reset. A caller that reads the clock anyway (an event loop, once
// per event) can instead arm from that exact time with ResetFrom, and then
// the wheel keeps no clock for it. A timer never fires before its duration
// has passed, whatever the duration and however late the wheel's goroutine
// runs; it fires normally within a tick and a little after it. A wheel with
// nothing due sleeps until its next occupied slot instead of ticking; a
// Stop wakes it if it would otherwise keep the stopped timer longer than a
// second.
//
// Callbacks run one at a time on the wheel's goroutine and must not block:
// hand slow work to another goroutine, or install an executor with
// WithExecutor. Tests drive a wheel deterministically with a ManualClock.
//
// When not to use it: for a handful of timers, or timers that are never
// reset, time.AfterFunc is simpler and as fast. The wheel trades precision
// for cost; if you need sub-tick accuracy, use time.Timer.
//
// The code: levels.go is the timing wheel as a plain data structure;
// clock.go the coarse clock and its hold-backs; inbox.go how resetters reach
// the driver; driver.go the wheel's goroutine; timer.go the Timer.
package wheel

import (
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Wheel is a hierarchical timing wheel. Create one with New; its zero value
// is not usable. All methods may be called from any goroutine.
//
// Ownership: clock, sleepUntil, inMin, sleepLong, stopWoke, wakeups and
// count are shared and accessed only atomically; the inbox's heads too. The
// configuration fields are written by New and only read afterwards.
// Everything under "owned by the driver" is touched only by the wheel's
// goroutine (or, for a manual wheel, by ManualClock.Advance, which holds
// the clock's mutex).
type Wheel struct {
	// Read on every Reset; nothing written often shares its cache line.
	clock     atomic.Uint64
	tickNanos int64
	magic     uint64 // floor((2^64-1)/tickNanos), for division-free divTick
	maxDur    time.Duration
	manual    *ManualClock
	_         [24]byte

	sleepUntil atomic.Int64  // nanos since start the driver sleeps until; 0 while awake
	inMin      atomic.Uint64 // the earliest deadline pushed since the driver last took the inbox (see takeIn)
	sleepLong  atomic.Bool   // the driver sleeps beyond releaseDelay: a Stop must wake it
	stopWoke   atomic.Bool   // a Stop woke the driver (see released)
	wakeups    atomic.Uint64
	count      atomic.Int64 // pending timers the driver has taken in; see Len

	slackNanos  int64
	activeTicks uint64       // keep the clock fresh this long after it was last read
	nowFunc     func() int64 // replaces the monotonic clock in tests
	exec        func(func())
	batchEnd    func()
	start       time.Time
	in          inbox
	park        parker
	canPrecise  bool // sleeps before a timer may be taken in futex (GOMAXPROCS > 1 at New)
	done        chan struct{}
	stopOnce    sync.Once

	// Owned by the driver.
	lv         levels
	holds      holdBacks
	npending   int64  // the driver's count of pending timers, published in count
	lastActive uint64 // tick of the last sign that the coarse clock is read
	lastTake   int64  // when the driver last took in the inbox (see takeIn)
	leftStale  bool   // the last step marked the clock stale
	fired      int    // callbacks run since the last batchEnd
}

// New creates a wheel and, unless WithClock is given, starts its goroutine on
// the monotonic clock. Call Stop to release it. New panics on an invalid
// option (see Validate), with a message that says what is allowed.
func New(opts ...Option) *Wheel {
	w := build(opts)
	if w.manual == nil {
		go w.run()
	}
	return w
}

// build makes a wheel without starting its goroutine.
func build(opts []Option) *Wheel {
	cfg, err := configOf(opts)
	if err != nil {
		panic(err.Error())
	}
	w := &Wheel{
		tickNanos:   int64(cfg.tick),
		magic:       math.MaxUint64 / uint64(cfg.tick),
		slackNanos:  int64(cfg.tick) / 4,
		exec:        cfg.exec,
		batchEnd:    cfg.batchEnd,
		start:       time.Now(),
		activeTicks: max(uint64(time.Second/cfg.tick), 8),
	}
	if m := uint64(math.MaxInt64) / uint64(w.tickNanos); m < maxWhen-2 {
		w.maxDur = time.Duration(math.MaxInt64)
	} else {
		w.maxDur = time.Duration((maxWhen - 2) * uint64(w.tickNanos))
	}
	procs := runtime.GOMAXPROCS(0)
	w.in.init(procs)
	w.inMin.Store(maxWhen)
	if cfg.clock != nil {
		if !cfg.clock.attached.CompareAndSwap(false, true) {
			panic("wheel: ManualClock already drives a wheel")
		}
		cfg.clock.w = w
		w.manual = cfg.clock
		w.slackNanos = 0
		w.clock.Store(clockManual)
		w.lv.init(uint64(cfg.clock.now.Load() / w.tickNanos))
		return w
	}
	w.lv.init(0)
	w.park.init(cfg.syscallSleep)
	w.canPrecise = w.park.precise && procs > 1
	w.done = make(chan struct{})
	return w
}

// AfterFunc arms a new Timer that calls f once, d from now. It reads the
// monotonic clock once (about 30 ns), so the callback runs at the first tick
// at or after now+d, or up to a quarter tick later (see ResetFrom), plus the
// wheel goroutine's scheduling delay, and never before. It allocates the
// Timer; to avoid that, embed a Timer and use Init and Reset (see
// Timer.Reset for the guarantees).
func (w *Wheel) AfterFunc(d time.Duration, f func()) *Timer {
	t := new(Timer)
	t.Init(w, f)
	if w.manual != nil || w.clock.Load()&clockStopped != 0 {
		t.Reset(d)
	} else {
		t.armExact(d)
	}
	return t
}

// Stop stops the wheel and waits for its goroutine, or for a ManualClock's
// Advance in progress: when Stop returns, no callback is running and none
// will run again. Timers still pending never fire; Len still counts them, and
// Reset and ResetFrom leave them as they are. Stop is idempotent. It must
// not be called from a callback (it would wait for itself).
func (w *Wheel) Stop() {
	w.stopOnce.Do(func() {
		for {
			c := w.clock.Load()
			if w.clock.CompareAndSwap(c, c|clockStopped) {
				break
			}
		}
		if w.done != nil {
			w.park.wake()
		}
	})
	if w.done != nil {
		<-w.done
	}
	if m := w.manual; m != nil {
		m.mu.Lock() // wait for an Advance in progress; the next one does nothing
		m.mu.Unlock()
	}
}

// Len reports the number of pending timers, for metrics. The wheel's
// goroutine counts each arming and stop when it takes it in from its inbox
// (so that Reset and Stop share no counter): within a quarter second while
// it is awake or woken, within a second for a stop, and at its next planned
// wake-up for an arming due after it. An arming stopped before it was
// taken in is never counted. On a manual wheel Len first takes in what is
// waiting, so it is exact (except when called from a callback during
// Advance), but fires nothing: a timer already due when it is taken in (an
// arming that raced an Advance past its deadline) waits on the due list
// for the next Advance. It costs one atomic load on the real clock.
func (w *Wheel) Len() int {
	if m := w.manual; m != nil && m.mu.TryLock() {
		if w.clock.Load()&clockStopped == 0 {
			w.drain(-1) // a time before every deadline: file, fire nothing
		}
		m.mu.Unlock()
	}
	return int(w.count.Load())
}

// Tick reports the wheel's resolution.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tickNanos) }

// MaxDuration reports the longest duration Reset accepts before clamping:
// 2^41-3 ticks or math.MaxInt64 ns (292 years), whichever is shorter: about
// 69 years at the default 1ms tick (7 at MinTick), and math.MaxInt64 ns for
// ticks above about 4.19 ms. So a deadline armed at tick 0 is at most the
// clock's last tick. The wheel's clock stops 2^41-2 ticks after New; a
// deadline beyond it (a clamped duration armed late in the wheel's life) is
// never reached.
func (w *Wheel) MaxDuration() time.Duration { return w.maxDur }

// Now reports the wheel's coarse clock: the time since the wheel started,
// rounded down to the tick. It trails the monotonic clock by at most a tick
// plus scheduling delay. It costs a load, except on the first call after the
// wheel has slept, which reads the monotonic clock once and wakes the wheel
// to keep the coarse clock fresh again. With a ManualClock it is exact. It
// allocates nothing and takes no lock, except to wake the wheel.
func (w *Wheel) Now() time.Duration {
	c := w.clock.Load()
	if c&clockManual != 0 {
		return time.Duration(w.manual.now.Load())
	}
	if c&clockStale != 0 && c&clockStopped == 0 {
		return time.Duration(w.tickTime(w.refresh(c, w.sinceStart())))
	}
	return time.Duration(w.tickTime(c >> clockShift))
}

// Wakeups reports how many times the wheel's goroutine has woken since New:
// a measure of what the wheel costs the process while it runs (each
// wake-up costs a few to tens of µs of scheduling). It wakes once per tick
// at most while its coarse clock is being read (timers armed from exact
// instants, see ResetFrom, read no clock and need no such wake-ups), for
// its occupied slots (and 2 ms before a timer falls due, to sleep the rest
// precisely), and, while timers are being armed or stopped, up to four
// times a second, to take them in from its inbox and release the stopped;
// and an arming due before its planned wake-up (less a quarter tick of
// slack where it would fire with the slot then processed: see
// publishSleep) wakes it at once, to plan again. It costs one atomic load. A manual wheel has no goroutine and reports 0.
func (w *Wheel) Wakeups() uint64 { return w.wakeups.Load() }

// Elapsed reports the exact time since the wheel started, on the clock that
// Now rounds down to the tick: the monotonic clock, or the ManualClock. Unlike
// Now it reads the system clock on every call (about 30 ns here), so it is
// for measurements (how long after a deadline something happened) and for
// callers that read it once per event and pass it to ResetFrom and the
// policies' explicit-time calls, not for every reset. It allocates nothing;
// any goroutine may call it.
func (w *Wheel) Elapsed() time.Duration {
	if m := w.manual; m != nil {
		return time.Duration(m.now.Load())
	}
	return time.Duration(w.sinceStart())
}

func (w *Wheel) sinceStart() int64 {
	if w.nowFunc != nil {
		return w.nowFunc()
	}
	return int64(time.Since(w.start))
}

// ticksCeil returns ceil(d/tick) for d > 0, 0 otherwise, and maxWhen for d
// above MaxDuration. No division.
func (w *Wheel) ticksCeil(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	if d > w.maxDur {
		return maxWhen
	}
	q, r := w.divTick(uint64(d))
	if r != 0 {
		q++
	}
	return q
}

// exactWhen returns the deadline of a timer armed for d after the exact
// instant from (nanoseconds since start) while the clock reads tick now: the
// first tick at or after from+d, and at least the tick after now.
func (w *Wheel) exactWhen(from int64, d time.Duration, now uint64) uint64 {
	end := satAdd(max(from, 0), int64(min(max(d, 0), w.maxDur)))
	q, r := w.divTick(uint64(end))
	if r != 0 {
		q++
	}
	return min(max(q, now+1), maxWhen)
}

// manualWhen is the deadline, in ticks, of a timer on a manual wheel armed
// for d from fromNanos (not after the clock's now): the clock is exact, so
// the deadline is too, the first tick at or after from+d, and at least the
// tick after now.
func (w *Wheel) manualWhen(fromNanos int64, d time.Duration) uint64 {
	return w.exactWhen(fromNanos, d, w.tickOf(w.manual.now.Load()))
}

// divTick returns x/tick and x%tick, with a multiplication by the
// precomputed reciprocal instead of a division.
func (w *Wheel) divTick(x uint64) (q, r uint64) {
	tick := uint64(w.tickNanos)
	q, _ = bits.Mul64(x, w.magic) // floor(x/tick) or one less
	r = x - q*tick
	if r >= tick {
		q++
		r -= tick
	}
	return q, r
}

// tickTime returns the time of tick t, in nanoseconds since start, saturating.
func (w *Wheel) tickTime(t uint64) int64 {
	if t > uint64(math.MaxInt64/w.tickNanos) {
		return math.MaxInt64
	}
	return int64(t) * w.tickNanos
}

// satAdd returns a+b for b >= 0, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// wakeBefore tells the driver that a pending timer on the inbox falls due
// at tick when: it lowers inMin to when, so that the driver takes the inbox
// in before then, and wakes the driver if it plans to sleep past when,
// with the quarter-tick slack publishSleep describes: a deadline that
// would fire with the slot the driver then processes, up to a quarter
// tick late, does not wake it.
// Pairs with the driver storing sleepUntil before it looks at the inbox for
// the last time: one of the two sees the other.
func (w *Wheel) wakeBefore(when uint64) {
	for m := w.inMin.Load(); when < m; m = w.inMin.Load() {
		if w.inMin.CompareAndSwap(m, when) {
			break
		}
	}
	if v := w.sleepUntil.Load(); v != 0 {
		at, until := w.tickTime(when), v&^sleepModes
		switch v & sleepModes { // see publishSleep
		case sleepSlack:
			at = satAdd(at, w.slackNanos)
		case sleepLeadIn:
			at, until = satAdd(at, w.slackNanos), satAdd(until, preciseLead)
		}
		if at < until {
			w.wake()
		}
	}
}

// released tells the driver that a timer was stopped: it wakes the driver
// if its sleep may last longer than releaseDelay, so that the stopped timer
// (on the inbox, or queued there by an arming it cancels) is let go within
// releaseDelay. Pairs with the driver storing sleepLong before it looks at
// the inbox for the last time.
func (w *Wheel) released() {
	if w.sleepLong.Load() {
		w.stopWoke.Store(true)
		w.wake()
	}
}

// wake nudges a sleeping driver. It never blocks.
func (w *Wheel) wake() {
	if w.done != nil {
		w.park.wake()
	}
}

// push puts t, whose queued bit the caller just set, on the inbox, and
// then tells the driver what t needs as it stands now: a wake-up before its
// deadline if it is pending, a release if it is stopped. t is read again
// because an arming or a Stop that landed between the caller's
// compare-and-swap and this push saw t queued, pushed nothing, and may
// have made its own check while the driver was awake: that check falls to
// this push, now that t is on the inbox.
func (w *Wheel) push(t *Timer) {
	w.in.push(t)
	if s := t.state.Load(); s&statePending != 0 {
		w.wakeBefore(s >> whenShift)
	} else {
		w.released()
	}
}
