// Package wheel is a lock-free hashed hierarchical timing wheel for timeouts
// that are reset far more often than they fire: the idle, keepalive and
// retransmission timers of network connections.
//
// The wheel keeps one clock, the monotonic clock, as Go's runtime does:
// Reset and AfterFunc read it and round the deadline up to the tick, so a
// timer never fires before its duration has passed, however late the
// wheel's goroutine runs, and normally fires at that tick. An event loop
// reads the clock once per batch of events (Wheel.Now) and arms the
// batch's timers from that instant with ResetFrom, which reads no clock.
// The wheel's goroutine sleeps until its next occupied slot, or until an
// earlier arming wakes it; moving a deadline later never wakes it.
//
// Callbacks run one at a time on the wheel's goroutine and must not block:
// hand slow work to another goroutine, or install an executor with
// WithExecutor. Tests drive a wheel deterministically with a ManualClock.
//
// When not to use it: for a handful of timers, or timers that are never
// reset, time.AfterFunc is simpler and as fast. The wheel trades precision
// for cost; if you need sub-tick accuracy, use time.Timer.
//
// The code: levels.go is the timing wheel as a data structure; inbox.go
// how resetters reach the driver, the wheel's goroutine (driver.go).
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
type Wheel struct {
	// Atomic fields and the inbox's heads are shared; the rest up to the driver's
	// are written by build only. Read on every arming; no hot write nearby.
	stopped   atomic.Bool
	quick     bool   // real clock and DefaultTick: Init sets stateQuick
	holdMax   uint64 // the largest state word holds decides on (no overflow, no clamp); 0 if manual
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

	// Owned by the driver (on a manual wheel, under the ManualClock's mutex).
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

func build(opts []Option) *Wheel {
	cfg, err := configOf(opts)
	if err != nil {
		panic(err.Error())
	}
	w := &Wheel{
		tickNanos: int64(cfg.tick),
		magic:     math.MaxUint64 / uint64(cfg.tick),
		maxDur:    time.Duration(math.MaxInt64),
		exec:      cfg.exec,
		batchEnd:  cfg.batchEnd,
		start:     time.Now(),
	}
	if uint64(math.MaxInt64)/uint64(w.tickNanos) >= maxWhen-2 {
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
	w.quick = cfg.tick == DefaultTick
	w.holdMax = min(maxWhen-2, uint64(math.MaxInt64/w.tickNanos))<<whenShift | 1<<whenShift - 1
	w.park.init(cfg.syscallSleep)
	w.canPrecise = w.park.precise && procs > 1
	w.done = make(chan struct{})
	return w
}

// AfterFunc arms a new Timer that calls f once, d from now, as Reset does.
// It allocates the Timer; to avoid that, embed a Timer and use Init and
// Reset.
func (w *Wheel) AfterFunc(d time.Duration, f func()) *Timer {
	t := new(Timer)
	t.Init(w, f)
	t.Reset(d)
	return t
}

// Stop stops the wheel and waits for its goroutine, or for a ManualClock's
// Advance in progress: when Stop returns, no callback is running and none
// will run again. Pending timers never fire; Len still counts them, and
// Reset and ResetFrom leave them as they are. Stop is idempotent; it must
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

// Len reports the number of pending timers, for metrics, within a second
// (the wheel's goroutine counts armings and stops as it takes them in, so
// Reset and Stop share no counter); one atomic load. On a manual wheel it
// takes in what waits (firing nothing): exact, but from a callback in Advance.
func (w *Wheel) Len() int {
	if m := w.manual; m != nil && m.mu.TryLock() {
		if !w.stopped.Load() {
			w.drain()
		}
		m.mu.Unlock()
	}
	return int(w.count.Load())
}

// Tick reports the wheel's resolution.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tickNanos) }

// MaxDuration reports the longest duration Reset accepts before clamping:
// 2^41-3 ticks or math.MaxInt64 ns, whichever is shorter (69 years at the
// default tick). A deadline past 2^41-2 ticks after New never comes.
func (w *Wheel) MaxDuration() time.Duration { return w.maxDur }

// Now reports the exact time since the wheel started: the monotonic clock
// (about 26 ns here), or the ManualClock, for ResetFrom and the policies'
// explicit-time calls. It allocates nothing; any goroutine may call it.
func (w *Wheel) Now() time.Duration {
	if m := w.manual; m != nil {
		return time.Duration(m.now.Load())
	}
	return time.Duration(w.sinceStart())
}

// Wakeups reports how often the wheel's goroutine woke since New: for its
// occupied slots (and 2 ms before, to sleep the rest precisely), for an
// earlier arming, and about once a second while timers are armed or
// stopped, to count them and release the stopped. A manual wheel reports 0.
func (w *Wheel) Wakeups() uint64 { return w.wakeups.Load() }

func (w *Wheel) sinceStart() int64 {
	if w.nowFunc != nil {
		return w.nowFunc()
	}
	return int64(time.Since(w.start))
}

// deadline returns the tick ResetFrom(from, d) arms for: the first at or after
// from+d, d clamped to [0, MaxDuration]; on a manual wheel at least now's next.
func (w *Wheel) deadline(from, d time.Duration) uint64 {
	q, r := w.divTick(uint64(satAdd(max(int64(from), 0), int64(min(max(d, 0), w.maxDur)))))
	if m := w.manual; m != nil {
		return max(min(q+min(r, 1), maxWhen), w.tickOf(m.now.Load())+1)
	}
	return min(q+min(r, 1), maxWhen)
}

// holds reports whether pending state s has the tick deadline(from, d) gives
// on a real clock, where deadline clamps nothing (holdMax); false: arm decides.
func (w *Wheel) holds(s uint64, from, d time.Duration) bool {
	x, tick := uint64(from)+uint64(d), uint64(w.tickNanos)
	return s <= w.holdMax && from|d >= 0 && x <= math.MaxInt64 && s>>whenShift*tick-x < tick
}

func (w *Wheel) tickOf(nanos int64) uint64 {
	q, _ := w.divTick(uint64(max(nanos, 0)))
	return q
}

// divTick returns x/tick and x%tick, multiplying by a reciprocal.
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

// tickTime returns the time of tick t in nanoseconds since start,
// math.MaxInt64 from the clock's end (maxWhen) or on overflow.
func (w *Wheel) tickTime(t uint64) int64 {
	if t >= maxWhen || t > uint64(math.MaxInt64/w.tickNanos) {
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
