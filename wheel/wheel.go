// Package wheel is a lock-free hashed hierarchical timing wheel for timeouts
// that are reset far more often than they fire: the idle, keepalive and
// retransmission timers of network connections.
//
// The wheel keeps one clock, the monotonic clock, as Go's runtime does:
// Reset and AfterFunc read it and round the deadline up to the tick, so a
// timer never fires before its duration has passed, however late the
// wheel's goroutine runs, and normally fires at that tick. An event loop
// that reads the clock once per batch of events (Wheel.Now) arms every
// timer of the batch from that instant with ResetFrom, which reads no
// clock and costs a few nanoseconds on a pending timer. The wheel's
// goroutine sleeps until its next occupied slot, or until an arming
// earlier than that wakes it; a Stop wakes it if it would otherwise keep
// the stopped timer longer than a second.
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
// inbox.go how resetters reach the driver; driver.go the wheel's
// goroutine; park.go how it sleeps; timer.go the Timer.
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
// Ownership: stopped, sleepUntil, inMin, sleepLong, pushWoke, wakeups and count
// are shared and accessed only atomically; the inbox's heads too. The
// configuration fields are written by build and only read afterwards.
// Everything under "owned by the driver" is touched only by the wheel's
// goroutine (or, for a manual wheel, by ManualClock.Advance, which holds
// the clock's mutex).
type Wheel struct {
	// Read on every arming; nothing written often shares its cache line.
	stopped   atomic.Bool
	tickNanos int64
	magic     uint64 // floor((2^64-1)/tickNanos), for division-free divTick
	maxDur    time.Duration
	manual    *ManualClock
	nowFunc   func() int64 // replaces the monotonic clock in tests
	start     time.Time
	_         [8]byte

	sleepUntil atomic.Int64  // nanos since start the driver sleeps until; 0 while awake
	inMin      atomic.Uint64 // the earliest deadline pushed since the driver last took the inbox in
	sleepLong  atomic.Bool   // the driver sleeps beyond releaseDelay: a push must wake it
	pushWoke   atomic.Bool   // a push woke the driver (see queued)
	wakeups    atomic.Uint64
	count      atomic.Int64 // pending timers the driver has taken in; see Len

	exec       func(func())
	batchEnd   func()
	in         inbox
	park       parker
	canPrecise bool // sleeps before a timer falls due may be in futex (GOMAXPROCS > 1 at New)
	done       chan struct{}
	stopOnce   sync.Once

	// Owned by the driver.
	lv       levels
	npending int64 // the driver's count of pending timers, published in count
	fired    int   // callbacks run since the last batchEnd
	lastTake int64 // when the driver last took the inbox in
	tookAny  bool  // and whether it took anything
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
		tickNanos: int64(cfg.tick),
		magic:     math.MaxUint64 / uint64(cfg.tick),
		exec:      cfg.exec,
		batchEnd:  cfg.batchEnd,
		start:     time.Now(),
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
		w.lv.init(w.tickOf(cfg.clock.now.Load()))
		return w
	}
	w.lv.init(0)
	w.park.init(cfg.syscallSleep)
	w.canPrecise = w.park.precise && procs > 1
	w.done = make(chan struct{})
	return w
}

// AfterFunc arms a new Timer that calls f once, d from now, as Reset does:
// at the first tick at or after now+d, plus the wheel goroutine's
// scheduling delay, and never before. It allocates the Timer; to avoid
// that, embed a Timer and use Init and Reset.
func (w *Wheel) AfterFunc(d time.Duration, f func()) *Timer {
	t := new(Timer)
	t.Init(w, f)
	t.Reset(d)
	return t
}

// Stop stops the wheel and waits for its goroutine, or for a ManualClock's
// Advance in progress: when Stop returns, no callback is running and none
// will run again. Timers still pending never fire; Len still counts them, and
// Reset and ResetFrom leave them as they are. Stop is idempotent. It must
// not be called from a callback (it would wait for itself).
func (w *Wheel) Stop() {
	w.stopOnce.Do(func() {
		w.stopped.Store(true)
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
// (so that Reset and Stop share no counter), within a second. An arming
// stopped before it was taken in is never counted. On a
// manual wheel Len first takes in what is waiting, so it is exact (except
// when called from a callback during Advance), but fires nothing: a timer
// already due when it is taken in fires at the next tick. It costs one
// atomic load on the real clock.
func (w *Wheel) Len() int {
	if m := w.manual; m != nil && m.mu.TryLock() {
		if !w.stopped.Load() {
			w.drain() // files, fires nothing
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
// ticks above about 4.19 ms. The wheel's clock ends 2^41-1 ticks after New;
// a deadline beyond it (a clamped duration armed late in the wheel's life)
// is never reached.
func (w *Wheel) MaxDuration() time.Duration { return w.maxDur }

// Now reports the exact time since the wheel started: the monotonic clock
// (about 26 ns here), or the ManualClock. Pass it to ResetFrom and to the
// policies' explicit-time calls; read it once per batch of events where
// there are many. It allocates nothing; any goroutine may call it.
func (w *Wheel) Now() time.Duration {
	if m := w.manual; m != nil {
		return time.Duration(m.now.Load())
	}
	return time.Duration(w.sinceStart())
}

// Elapsed is Now, under the name older callers use.
func (w *Wheel) Elapsed() time.Duration { return w.Now() }

// Wakeups reports how many times the wheel's goroutine has woken since New:
// a measure of what the wheel costs the process while it runs (each
// wake-up costs a few to tens of µs of scheduling). It wakes for its
// occupied slots (and 2 ms before a timer falls due, to sleep the rest
// precisely), for an arming due before its planned wake-up, and, while
// timers are being armed or stopped, about once a second to count them and
// release the stopped. Moving a pending deadline later never wakes it. It
// costs one atomic load. A manual wheel has no goroutine and reports 0.
func (w *Wheel) Wakeups() uint64 { return w.wakeups.Load() }

func (w *Wheel) sinceStart() int64 {
	if w.nowFunc != nil {
		return w.nowFunc()
	}
	return int64(time.Since(w.start))
}

// when returns the deadline, in ticks, of a timer armed for d after the
// instant from (nanoseconds since start): the first tick at or after
// from+d, with d clamped to [0, MaxDuration], at most maxWhen.
func (w *Wheel) when(from int64, d time.Duration) uint64 {
	end := satAdd(max(from, 0), int64(min(max(d, 0), w.maxDur)))
	q, r := w.divTick(uint64(end))
	if r != 0 {
		q++
	}
	return min(q, maxWhen)
}

// manualWhen is when on a manual wheel, whose clock is exact: at least the
// tick after the clock's now, so that a past deadline fires on the next
// tick.
func (w *Wheel) manualWhen(from int64, d time.Duration) uint64 {
	return max(w.when(from, d), w.tickOf(w.manual.now.Load())+1)
}

// tickOf returns the tick of a time in nanoseconds since start.
func (w *Wheel) tickOf(nanos int64) uint64 {
	q, _ := w.divTick(uint64(max(nanos, 0)))
	return q
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
// at tick when: it lowers inMin, so that the driver takes the inbox in
// then, and wakes the driver if it plans to sleep past then. Pairs with
// the driver storing sleepUntil before it plans by inMin for the last
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

// queued tells the driver that a timer waits on the inbox: it wakes the
// driver if its sleep may last longer than releaseDelay, so that a stopped
// timer is let go, and an arming counted, within releaseDelay. Pairs with
// the driver storing sleepLong before it plans by the inbox for the last
// time.
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

// push puts t, whose queued bit the caller just set, on the inbox, and
// then tells the driver what t needs as it stands now: a wake-up before its
// deadline if it is pending, and one within releaseDelay. t is read again
// because an arming or a Stop that landed between the caller's
// compare-and-swap and this push saw t queued, pushed nothing, and may
// have made its own check while the driver was awake: that check falls to
// this push, now that t is on the inbox.
func (w *Wheel) push(t *Timer) {
	w.in.push(t)
	if s := t.state.Load(); s&statePending != 0 {
		w.wakeBefore(s >> whenShift)
	}
	w.queued()
}
