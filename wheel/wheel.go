// Package wheel is a lock-free hashed hierarchical timing wheel for timeouts
// that are reset far more often than they fire: the idle, keepalive and
// retransmission timers of network connections.
//
// A Reset costs a few nanoseconds, allocates nothing, takes no lock and reads
// no system clock: it reads the wheel's coarse clock (the current tick),
// which the wheel's goroutine keeps fresh while timers are being reset. A
// caller that reads the clock anyway (an event loop, once per event) can
// instead arm from that exact time with ResetFrom, and then the wheel keeps
// no clock for it. A timer never fires before its duration has passed,
// fires normally within a tick and a little after it, and a wheel with
// nothing due sleeps until its next occupied slot instead of ticking.
//
// Callbacks run one at a time on the wheel's goroutine and must not block:
// hand slow work to another goroutine, or install an executor with
// WithExecutor. Tests drive a wheel deterministically with a ManualClock.
//
// When not to use it: for a handful of timers, or timers that are never
// reset, time.AfterFunc is simpler and as fast. The wheel trades precision
// for cost; if you need sub-tick accuracy, use time.Timer.
package wheel

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Layout of Wheel.clock: the current coarse tick laid out as a Timer.state
// word armed from it would hold it (the tick at whenShift, its low bits as
// the base), with three flag bits below. A Reset's fast path then compares a
// timer's state with the clock word plus the duration, with no shifting. Any
// flag sends a resetter down the slow path.
const (
	clockStale   = 1 << 0 // the wheel sleeps and does not keep the tick fresh
	clockStopped = 1 << 1 // Stop was called
	clockManual  = 1 << 2 // driven by a ManualClock, which has the exact time
	clockSlow    = clockStale | clockStopped | clockManual
	clockShift   = whenShift
)

// clockOf returns the clock word for tick t, without flags.
func clockOf(t uint64) uint64 {
	return t<<whenShift | (t&baseMask)<<baseShift
}

// Buckets: 7 levels of 64 slots cover the 41-bit deadline, then a list of
// timers due but held back (see fireAt).
const (
	slotBits      = 6
	slotsPerLevel = 1 << slotBits
	numLevels     = 7
	slotDue       = numLevels * slotsPerLevel
	numSlots      = slotDue + 1
)

// Tick limits accepted by WithTick.
const (
	MinTick     = 100 * time.Microsecond
	MaxTick     = time.Hour
	DefaultTick = time.Millisecond
)

// Wheel is a hierarchical timing wheel. Create one with New; its zero value
// is not usable. All methods may be called from any goroutine.
//
// Ownership: clock, sleepUntil, pending, inbox, wakeups and catchUps are
// shared and accessed only atomically. The configuration fields are written
// by New and only read afterwards. Everything under "owned by the driver" is
// touched only by the wheel's goroutine (or, for a manual wheel, by
// ManualClock.Advance, which holds the clock's mutex).
type Wheel struct {
	// Read on every Reset; nothing written often shares its cache line.
	clock     atomic.Uint64
	tickNanos int64
	magic     uint64 // floor((2^64-1)/tickNanos), for division-free ticksCeil
	maxDur    time.Duration
	manual    *ManualClock
	_         [24]byte

	sleepUntil atomic.Int64 // nanos since start the driver sleeps until; 0 while awake
	wakeups    atomic.Uint64
	count      atomic.Int64 // pending timers the driver has taken in; see Len

	slackNanos int64
	nowFunc    func() int64 // replaces the monotonic clock in tests
	exec       func(func())
	batchEnd   func()
	start      time.Time
	inbox      []inboxShard
	shardShift uint
	park       parker
	done       chan struct{}
	stopOnce   sync.Once

	// Owned by the driver.
	cur         uint64          // every tick <= cur has been processed
	npending    int64           // the driver's count of pending timers, published in count
	heads       [numSlots]Timer // list sentinels: w is nil, state holds the index
	occupied    [numLevels]uint64
	coarse      [numLevels]uint64 // occupied slots that may hold a coarse timer; see slotAt
	hiccups     []hiccup
	held        []uint64 // ticks whose end of visibility a CatchUp is still recording
	lastActive  uint64   // tick of the last sign that timers are being reset
	nap         uint64   // ticks to sleep while active: 1, or more while CatchUp keeps the clock
	helpedRun   int      // consecutive wake-ups that found the clock kept by CatchUp
	stepExtra   int64    // the longest hold-back recorded during this wake-up
	stepHelped  int      // CatchUp records taken during this wake-up
	activeTicks uint64   // keep the clock fresh this long after activity
	leftStale   bool     // the last step marked the clock stale
	precise     bool     // the next sleep ends where a timer falls due: take it in futex
	fired       int      // callbacks run since the last batchEnd

	// Records of ticks that a CatchUp took off the clock: written by
	// CatchUp, taken by the driver (see takeCatchUps). Apart from the hot
	// fields above.
	_        [64]byte
	catchUps [catchUpSlots]catchUp
}

// catchUp records that CatchUp replaced a tick on the coarse clock, and when
// that tick stopped being visible, for the driver's hiccup table. The slot of
// tick t is catchUps[t%catchUpSlots]. key is 0 (empty) or t<<2 with
// catchUpBusy while a CatchUp (or the driver taking the record) owns the
// slot, catchUpDone once until holds the time (nanoseconds since start) by
// which t was no longer visible. Only the owner of a busy slot writes until.
type catchUp struct {
	key   atomic.Uint64
	until atomic.Int64
}

// maxNap is the longest the wheel sleeps between wake-ups while timers are
// being reset and CatchUp keeps its clock, in ticks.
const maxNap = 8

// napAfter is how many wake-ups in a row must find the clock kept by
// CatchUp before the wheel starts to nap: a CatchUp that merely came
// between a tick's end and a late wake-up is no sign that the callers keep
// the clock.
const napAfter = 8

const (
	catchUpSlots = 64
	catchUpBusy  = 1
	catchUpDone  = 2
)

// hiccup records that the coarse tick base stayed visible extra nanoseconds
// longer than the wheel promises (one tick plus slack), because its goroutine
// was scheduled late. Timers armed from that tick are held back by extra.
type hiccup struct {
	base  uint64
	extra int64
}

type config struct {
	tick         time.Duration
	clock        *ManualClock
	exec         func(func())
	batchEnd     func()
	syscallSleep bool
}

// Option configures a Wheel.
type Option func(*config)

// WithTick sets the wheel's resolution (default 1ms). It must lie within
// [MinTick, MaxTick]; New panics otherwise.
func WithTick(d time.Duration) Option {
	return func(c *config) { c.tick = d }
}

// WithClock drives the wheel by a ManualClock instead of the monotonic clock:
// no goroutine is started, and timers fire synchronously inside
// ManualClock.Advance. A ManualClock drives at most one wheel.
func WithClock(c *ManualClock) Option {
	return func(cfg *config) { cfg.clock = c }
}

// WithExecutor hands each expired timer's callback to exec instead of running
// it on the wheel's goroutine. exec itself runs on the wheel's goroutine and
// must not block; it lets callers route expiries to their own event loops.
func WithExecutor(exec func(f func())) Option {
	return func(c *config) { c.exec = exec }
}

// WithBatchEnd calls f on the wheel's goroutine after every wake-up (or
// ManualClock.Advance) in which at least one timer fired, once all of them
// have been called back or handed to the executor. Servers use it to hand a
// whole batch of expiries to each event loop at once.
func WithBatchEnd(f func()) Option {
	return func(c *config) { c.batchEnd = f }
}

// WithSyscallSleep makes the wheel's goroutine take every sleep in a system
// call (futex) on Linux, instead of only the last 2 ms before a timer falls
// due; elsewhere, and with a ManualClock, it has no effect.
//
// A runtime timer belongs to a P. When every P is held by a goroutine
// waiting in a blocking system call (gnet's event loops in epoll_wait, one
// per P), nothing runs those timers until such a goroutine passes through
// the scheduler or the runtime's monitor takes a P back: a 1 ms sleep ends
// about 10 ms late, and the wheel's timers fire that late. The first remedy
// is a P to spare (GOMAXPROCS above the number of such goroutines): an idle
// P's thread runs every P's due timers on time. This option is the other:
// the kernel wakes a thread sleeping in futex on time.
//
// It has costs, measured with a gnet server (docs/design.md): the sleeping
// goroutine keeps its P, so with a loop on every P a loop that wakes
// meanwhile may wait for the monitor to free one (message-to-answer p99 5 ms
// against 0.5 ms); and with every P in a system call the monitor keeps
// taking them back, which cost the server about 25% more CPU at 20 000
// messages per second. netserver therefore leaves a P to spare instead.
// Programs whose goroutines block only through the runtime's network
// poller, as net.Conn users do, need neither.
//
// Without this option the wheel still sleeps in futex, on Linux with
// GOMAXPROCS above 1, for the last 2 ms before a timer falls due: a
// runtime-timer sleep ends 0-1 ms late even with a P to spare, and that
// lateness would go straight to the timer. The sleeps that only keep the
// coarse clock fresh, which are most of them while timers are being reset,
// stay on the runtime's timer.
func WithSyscallSleep() Option {
	return func(c *config) { c.syscallSleep = true }
}

// New creates a wheel and, unless WithClock is given, starts its goroutine on
// the monotonic clock. Call Stop to release it. New panics on an invalid
// option, with a message that says what is allowed.
func New(opts ...Option) *Wheel {
	w := build(opts)
	if w.manual == nil {
		go w.run()
	}
	return w
}

// build makes a wheel without starting its goroutine.
func build(opts []Option) *Wheel {
	cfg := config{tick: DefaultTick}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.tick < MinTick || cfg.tick > MaxTick {
		panic(fmt.Sprintf("wheel: tick %v out of range [%v, %v]", cfg.tick, MinTick, MaxTick))
	}
	w := &Wheel{
		tickNanos:  int64(cfg.tick),
		magic:      math.MaxUint64 / uint64(cfg.tick),
		slackNanos: int64(cfg.tick) / 4,
		exec:       cfg.exec,
		batchEnd:   cfg.batchEnd,
		start:      time.Now(),
		nap:        1,
	}
	if m := uint64(math.MaxInt64) / uint64(w.tickNanos); m < maxWhen-2 {
		w.maxDur = time.Duration(math.MaxInt64)
	} else {
		w.maxDur = time.Duration((maxWhen - 2) * uint64(w.tickNanos))
	}
	shards := 4
	for shards < 2*runtime.GOMAXPROCS(0) && shards < 64 {
		shards *= 2
	}
	w.inbox = make([]inboxShard, shards)
	w.shardShift = uint(64 - bits.TrailingZeros(uint(shards)))
	w.activeTicks = max(uint64(time.Second/cfg.tick), 8)
	for i := range w.heads {
		h := &w.heads[i]
		h.next, h.prev = h, h
		h.state.Store(uint64(i))
	}
	if cfg.clock != nil {
		if !cfg.clock.attached.CompareAndSwap(false, true) {
			panic("wheel: ManualClock already drives a wheel")
		}
		cfg.clock.w = w
		w.manual = cfg.clock
		w.slackNanos = 0
		w.clock.Store(clockManual)
		w.cur = uint64(cfg.clock.now.Load() / w.tickNanos)
		return w
	}
	w.park.init(cfg.syscallSleep)
	w.done = make(chan struct{})
	return w
}

// AfterFunc arms a new Timer that calls f once, d from now (see Timer.Reset
// for the guarantees). It allocates the Timer; to avoid that, embed a Timer
// and use Init and Reset.
func (w *Wheel) AfterFunc(d time.Duration, f func()) *Timer {
	t := new(Timer)
	t.Init(w, f)
	t.Reset(d)
	return t
}

// Stop stops the wheel and waits for its goroutine: when Stop returns, no
// callback is running and none will run again. Timers still pending never
// fire; Len still counts them. Stop is idempotent. It must not be called from
// a callback running on the wheel's goroutine (it would wait for itself).
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
}

// Len reports the number of pending timers, for metrics. The wheel's
// goroutine counts each arming and stop when it takes it in (within a tick),
// so that Reset and Stop share no counter: on the real clock a Reset or Stop
// shows in Len once the wheel has woken since. On a manual wheel Len first
// takes in what is waiting, so it is exact (except when called from a
// callback during Advance). It costs one atomic load on the real clock.
func (w *Wheel) Len() int {
	if m := w.manual; m != nil && m.mu.TryLock() {
		w.drain(m.now.Load())
		m.mu.Unlock()
	}
	return int(w.count.Load())
}

// Tick reports the wheel's resolution.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tickNanos) }

// MaxDuration reports the longest duration Reset accepts before clamping
// (2^41-2 ticks: about 69 years at the default 1ms tick, less the wheel's
// age; a wheel can run for that long).
func (w *Wheel) MaxDuration() time.Duration { return w.maxDur }

// Now reports the wheel's coarse clock: the time since the wheel started,
// rounded down to the tick. It trails the monotonic clock by at most a tick
// plus scheduling delay. It costs a load, except on the first call after the
// wheel has slept, which reads the monotonic clock once and wakes the wheel
// to keep the coarse clock fresh again (exactly what Reset does). With a
// ManualClock it is exact. It allocates nothing and takes no lock.
func (w *Wheel) Now() time.Duration {
	c := w.clock.Load()
	if c&clockSlow != 0 {
		if c&clockManual != 0 {
			return time.Duration(w.manual.now.Load())
		}
		if c&clockStale != 0 {
			now, _ := w.refresh(c)
			return time.Duration(now * uint64(w.tickNanos))
		}
	}
	return time.Duration((c >> clockShift) * uint64(w.tickNanos))
}

// Wakeups reports how many times the wheel's goroutine has woken since New:
// a measure of what the wheel costs the process while it runs (each
// wake-up costs a few to tens of µs of scheduling). An idle wheel does not
// wake, except for its occupied slots (and 2 ms before a timer falls due,
// to sleep the rest precisely); one whose coarse clock is being read wakes
// once per tick, or every 2 to 8 ticks while CatchUp keeps it (timers armed
// from exact instants, see ResetFrom, read no clock and need no such
// wake-ups). It costs one atomic load; any goroutine may call it. A manual
// wheel has no goroutine and reports 0.
func (w *Wheel) Wakeups() uint64 { return w.wakeups.Load() }

// Elapsed reports the exact time since the wheel started, on the clock that
// Now rounds down to the tick: the monotonic clock, or the ManualClock. Unlike
// Now it reads the system clock on every call (about 60 ns here), so it is
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

// CatchUp publishes the current tick on the coarse clock if the tick there
// is over, and reports whether it did. It reads the monotonic clock once (so
// it costs what Elapsed costs) and takes no lock.
//
// On a saturated machine the wheel's goroutine may run late, and a tick stays
// on the coarse clock longer than a tick. That never makes a timer early (the
// wheel holds back every timer armed from that tick by how long it stayed),
// but it makes them late, and it gives every timer armed meanwhile the same
// deadline. A goroutine that resets many timers, and so runs exactly when
// the wheel's goroutine is starved, can bound both by calling CatchUp every so
// many events (every 8, say). A goroutine that reads the clock on every
// event anyway can do better: arm from the exact time with ResetFrom, which
// needs neither the coarse clock nor hold-backs. While such
// calls keep the clock within a tick of the truth, the wheel's goroutine
// wakes less often to do it itself (every 2, 4, then 8 ticks), which saves
// the process most of its wake-ups under steady traffic. CatchUp does
// nothing while the tick on the clock is current, or the clock is stale (the
// next Reset reads the clock anyway), stopped, or manual. Any goroutine may
// call it.
func (w *Wheel) CatchUp() bool {
	r, ok := w.catchUpSwap()
	if ok {
		w.catchUpRecord(r)
	}
	return ok
}

// catchUpSwap is CatchUp's first half: it claims the record of the tick on
// the clock and replaces that tick with the current one, if it is over.
func (w *Wheel) catchUpSwap() (*catchUp, bool) {
	c := w.clock.Load()
	if c&clockSlow != 0 {
		return nil, false
	}
	t := c >> clockShift
	now := w.sinceStart()
	if now < w.tickTime(t+1) {
		return nil, false
	}
	// Claim t's record before taking t off the clock: the driver, which
	// fires timers only after it has seen the clock move on, then finds
	// the record and holds t's timers back until it is complete.
	r := &w.catchUps[t%catchUpSlots]
	old := r.key.Load()
	if old&catchUpBusy != 0 || old != 0 && old>>2 != t {
		return nil, false // someone else is at it, or an older record waits for the driver
	}
	if !r.key.CompareAndSwap(old, t<<2|catchUpBusy) {
		return nil, false
	}
	if !w.clock.CompareAndSwap(c, clockOf(uint64(now/w.tickNanos))) {
		r.key.Store(old) // the clock moved on without us: nothing to record
		return nil, false
	}
	if old == 0 {
		r.until.Store(0)
	}
	return r, true
}

// catchUpRecord is CatchUp's second half: resetters read the replaced tick
// until the swap, which came after catchUpSwap read the time, so it takes
// the time again for the end of that tick's visibility, and completes the
// record.
func (w *Wheel) catchUpRecord(r *catchUp) {
	r.until.Store(max(r.until.Load(), w.sinceStart()))
	r.key.Store(r.key.Load()&^catchUpBusy | catchUpDone)
}

// refresh handles a stale clock word c: the wheel is asleep, so read the
// monotonic clock once, publish its tick for the callers that follow, and
// wake the wheel so it keeps the clock fresh while it is being used. It
// reports the current tick, and false if the wheel has stopped.
func (w *Wheel) refresh(c uint64) (uint64, bool) {
	now := uint64(w.sinceStart() / w.tickNanos)
	for c&clockStale != 0 && c>>clockShift <= now {
		if c&clockStopped != 0 {
			return now, false
		}
		if w.clock.CompareAndSwap(c, clockOf(now)) {
			break
		}
		c = w.clock.Load()
	}
	w.wake()
	return now, c&clockStopped == 0
}

func (w *Wheel) sinceStart() int64 {
	if w.nowFunc != nil {
		return w.nowFunc()
	}
	return int64(time.Since(w.start))
}

// ticksCeil returns ceil(d/tick) for d > 0, 0 otherwise, clamped so that
// now+1+result stays within the deadline field. No division.
func (w *Wheel) ticksCeil(d time.Duration, now uint64) uint64 {
	if d <= 0 {
		return 0
	}
	lim := maxWhen - 1 - now
	if d >= w.maxDur {
		return lim
	}
	q, r := w.divTick(uint64(d))
	if r != 0 {
		q++
	}
	return min(q, lim)
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

// wake nudges a sleeping driver. It never blocks.
func (w *Wheel) wake() { w.park.wake() }

// push puts t on the inbox. when is the deadline that made it necessary, or
// 0 when the wheel need not wake for it (a Stop).
func (w *Wheel) push(t *Timer, when uint64) {
	s := &w.inbox[w.shard(t)]
	for {
		h := s.head.Load()
		t.qnext = h
		if s.head.CompareAndSwap(h, t) {
			break
		}
	}
	if when != 0 {
		// Pairs with the driver storing sleepUntil before it checks the
		// inbox: one of the two sees the other.
		if until := w.sleepUntil.Load(); until != 0 && w.tickTime(when) < until {
			w.wake()
		}
	}
}

func (w *Wheel) shard(t *Timer) int {
	return int((uint64(uintptr(unsafe.Pointer(t))) * 0x9E3779B97F4A7C15) >> w.shardShift)
}

type inboxShard struct {
	head atomic.Pointer[Timer]
	_    [56]byte
}

// ---- the driver ------------------------------------------------------------

func (w *Wheel) run() {
	defer close(w.done)
	defer w.countStops()
	for w.clock.Load()&clockStopped == 0 {
		w.wakeups.Add(1)
		w.sleepUntil.Store(0)
		wakeAt := w.step(w.sinceStart())
		if w.clock.Load()&clockStopped != 0 {
			return
		}
		// Pairs with push loading sleepUntil after it links a timer: either
		// the pusher sees our deadline and wakes us, or we see its timer.
		w.sleepUntil.Store(wakeAt)
		if w.inboxBusy() {
			continue
		}
		w.park.sleep(wakeAt, w.sinceStart, w.precise)
	}
}

// step does one wake-up's work at time now (nanoseconds since start):
// publish the tick, take the inbox, expire what is due, and decide whether
// to keep the clock fresh. It returns when the driver should wake next
// (math.MaxInt64: only when told to).
func (w *Wheel) step(now int64) int64 {
	nowTick := uint64(now / w.tickNanos)
	if w.leftStale && w.clock.Load()&clockStale == 0 {
		// A resetter (or Now) found the clock stale and refreshed it:
		// the coarse clock is being read, so keep it fresh.
		w.lastActive = nowTick
	}
	w.leftStale = false
	w.stepExtra, w.stepHelped = 0, 0
	w.publish(now)
	w.takeCatchUps()
	if w.drain(now) > 0 {
		w.lastActive = nowTick
	}
	w.advance(now)
	w.drain(now)
	w.endBatch()

	fireAt := int64(math.MaxInt64) // when the next timer may fall due
	if e, idx, ok := w.nextEvent(); ok {
		fireAt = w.slotAt(e, idx)
	}
	if at, ok := w.deferredMin(); ok && at < fireAt {
		fireAt = at
	}
	wakeAt := fireAt
	if len(w.held) > 0 {
		// A CatchUp is between taking a tick off the clock and recording
		// when: look again at the next tick.
		wakeAt = min(wakeAt, w.tickTime(nowTick+1))
	}
	if nowTick-w.lastActive < w.activeTicks {
		// Keep the clock fresh: wake at the next tick, or, once CatchUp
		// calls have kept it for napAfter wake-ups in a row, let them,
		// and sleep twice as long each time (up to maxNap ticks). A
		// wake-up costs the process tens of µs. One that finds no
		// CatchUp record, or a hold-back of more than a tick, goes back
		// to every tick.
		if w.stepHelped > 0 && w.stepExtra <= w.tickNanos {
			if w.helpedRun++; w.helpedRun >= napAfter {
				w.nap = min(2*w.nap, maxNap)
			}
		} else {
			w.helpedRun, w.nap = 0, 1
		}
		wakeAt = min(wakeAt, w.tickTime(nowTick+w.nap))
	} else {
		w.helpedRun, w.nap = 0, 1
		w.markStale()
		w.leftStale = true
	}
	// A sleep on the runtime's timer ends 0-1 ms late. When the wake-up is
	// for a timer, sleep the last preciseLead before it in futex, which
	// ends on time; a longer sleep first ends preciseLead early (on the
	// runtime's timer, so no more than a millisecond later) to take the
	// rest precisely. Sleeps that only keep the clock stay on the runtime's
	// timer: in futex the goroutine keeps its P, which costs the process
	// CPU (WithSyscallSleep), and with GOMAXPROCS 1 it would hold the only
	// one.
	w.precise = false
	if w.park.precise && fireAt <= wakeAt && fireAt != math.MaxInt64 && runtime.GOMAXPROCS(0) > 1 {
		if fireAt-now <= preciseLead {
			w.precise = true
		} else {
			wakeAt = fireAt - preciseLead
		}
	}
	return wakeAt
}

// preciseLead is how long before a timer falls due the wheel's goroutine
// starts sleeping precisely (see step), in nanoseconds: more than the
// millisecond by which a runtime-timer sleep may end late.
const preciseLead = int64(2 * time.Millisecond)

func (w *Wheel) inboxBusy() bool {
	for i := range w.inbox {
		if w.inbox[i].head.Load() != nil {
			return true
		}
	}
	return false
}

func (w *Wheel) endBatch() {
	if w.fired > 0 {
		w.fired = 0
		if w.batchEnd != nil {
			w.batchEnd()
		}
	}
}

// publish makes the tick of now the coarse clock, unless a resetter already
// published it, and accounts for how long the previous value stayed visible.
func (w *Wheel) publish(now int64) {
	k := uint64(now / w.tickNanos)
	for {
		c := w.clock.Load()
		t := c >> clockShift
		if c&clockStale == 0 && t >= k {
			return
		}
		if w.clock.CompareAndSwap(c, clockOf(max(t, k))|c&clockStopped) {
			if c&clockStale == 0 {
				// Resetters read t until the swap, which came after now was
				// read: take the time again for the end of t's visibility.
				w.visibleUntil(t, max(now, w.sinceStart()))
			}
			return
		}
	}
}

// markStale tells resetters that the tick will not be kept fresh: the wheel
// is about to sleep past the next tick.
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

// takeCatchUps moves the records of CatchUp calls into the hiccup table.
// It runs after publish: every tick that left the clock before publish
// loaded it has its record claimed by then (CatchUp claims before it swaps),
// so a record still busy is listed in held, and timers armed from that tick
// wait until the next step finds it done.
func (w *Wheel) takeCatchUps() {
	w.held = w.held[:0]
	for i := range w.catchUps {
		r := &w.catchUps[i]
		k := r.key.Load()
		switch {
		case k == 0:
		case k&catchUpBusy != 0:
			w.held = append(w.held, k>>2)
		case r.key.CompareAndSwap(k, k|catchUpBusy):
			w.visibleUntil(k>>2, r.until.Load())
			r.key.Store(0)
			w.stepHelped++
		default:
			w.held = append(w.held, k>>2) // a CatchUp claimed it meanwhile
		}
	}
}

// visibleUntil notes that tick t was the coarse clock until now. Resetters
// assume the true time was below (t+1)*tick + slack; if t stayed visible
// longer, timers armed from it are held back by the excess.
func (w *Wheel) visibleUntil(t uint64, now int64) {
	if extra := now - w.tickTime(t+1) - w.slackNanos; extra > 0 {
		w.stepExtra = max(w.stepExtra, extra)
		// Ticks come in order from publish and markStale, but a record
		// from CatchUp may be older than the last one.
		i := len(w.hiccups)
		for i > 0 && w.hiccups[i-1].base > t {
			i--
		}
		if i > 0 && w.hiccups[i-1].base == t {
			w.hiccups[i-1].extra = max(w.hiccups[i-1].extra, extra)
		} else {
			w.hiccups = slices.Insert(w.hiccups, i, hiccup{base: t, extra: extra})
		}
	}
	// Forget hiccups whose base no longer fits the 18 bits a timer keeps.
	// Slicing them off the front costs nothing; the next append that
	// outgrows the array copies only what is left, so a busy wheel whose
	// every tick is a little late (as runtime-timer sleeps are) pays O(1) a
	// tick for its table, not a copy of up to 2^18 entries
	// (BenchmarkWheel_LatePublish).
	i := 0
	for i < len(w.hiccups) && w.hiccups[i].base+baseMask < t {
		i++
	}
	w.hiccups = w.hiccups[i:]
}

// fireAt returns the earliest time, in nanoseconds since start, at which a
// timer in state s may fire: its tick, for a timer armed from an exact
// instant (the tick is at or after the deadline); its tick plus the slack
// and any hold-back, for one armed from the coarse clock.
func (w *Wheel) fireAt(s uint64) int64 {
	if s&stateExact != 0 {
		return w.tickTime(s >> whenShift)
	}
	at := satAdd(w.tickTime(s>>whenShift), w.slackNanos)
	if len(w.hiccups) == 0 && len(w.held) == 0 {
		return at
	}
	now := w.clock.Load() >> clockShift
	base := now - (now-(s>>baseShift))&baseMask
	if slices.Contains(w.held, base) {
		return math.MaxInt64
	}
	i := sort.Search(len(w.hiccups), func(i int) bool { return w.hiccups[i].base >= base })
	if i < len(w.hiccups) && w.hiccups[i].base == base {
		at += w.hiccups[i].extra
	}
	return at
}

// drain empties the inbox, filing, moving or dropping each timer on it, and
// returns how many of them were armed from the coarse clock: a sign that it
// is being read.
func (w *Wheel) drain(now int64) int {
	n := 0
	for i := range w.inbox {
		t := w.inbox[i].head.Swap(nil)
		for t != nil {
			next := t.qnext
			t.qnext = nil
			if s := t.state.And(^uint64(stateQueued)); s&(statePending|stateExact) == statePending {
				n++
			}
			if t.next != nil {
				w.unlink(t)
			}
			w.handle(t, now)
			t = next
		}
	}
	return n
}

// advance processes every slot that is due at now (see slotAt), then moves
// cur to the last tick whose every timer may fire.
func (w *Wheel) advance(now int64) {
	w.retryDue(now)
	for {
		e, idx, ok := w.nextEvent()
		if !ok || w.slotAt(e, idx) > now {
			break
		}
		w.cur = e
		w.expire(idx, now)
	}
	// Every slot left is due after now, so its tick lies beyond this one:
	// a coarse slot at tick e is due at e*tick + slack, an exact one at
	// e*tick.
	if now >= w.slackNanos {
		if target := uint64((now - w.slackNanos) / w.tickNanos); target > w.cur {
			w.cur = target
		}
	}
}

// slotAt returns when the slot idx at tick e may be processed: at the tick
// if it holds only timers armed from exact instants (their ticks are at or
// after their deadlines), else a quarter tick later, when the coarse ones
// armed for that tick may fire (less any hold-back, which handle applies).
func (w *Wheel) slotAt(e uint64, idx int) int64 {
	at := w.tickTime(e)
	if w.coarse[idx/slotsPerLevel]&(1<<(idx%slotsPerLevel)) != 0 {
		at = satAdd(at, w.slackNanos)
	}
	return at
}

// satAdd returns a+b for b >= 0, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// nextEvent returns the tick of the first occupied slot after cur and its
// index. The lowest occupied level always comes first: a level-l slot lies
// inside the current slot of every level above l.
func (w *Wheel) nextEvent() (uint64, int, bool) {
	for l := 0; l < numLevels; l++ {
		shift := uint(l * slotBits)
		digit := (w.cur >> shift) & (slotsPerLevel - 1)
		bm := w.occupied[l] & (^uint64(0) << (digit + 1))
		if bm != 0 {
			j := uint64(bits.TrailingZeros64(bm))
			e := w.cur>>(shift+slotBits)<<(shift+slotBits) | j<<shift
			return e, l*slotsPerLevel + int(j), true
		}
	}
	return 0, 0, false
}

// expire takes every timer out of slot idx and re-files, fires or drops it.
func (w *Wheel) expire(idx int, now int64) {
	w.emptied(idx)
	h := &w.heads[idx]
	t := h.next
	h.next, h.prev = h, h
	for t != h {
		next := t.next
		t.next, t.prev = nil, nil
		w.handle(t, now)
		t = next
	}
}

// retryDue re-examines the timers held back by a hiccup.
func (w *Wheel) retryDue(now int64) { w.expire(slotDue, now) }

func (w *Wheel) deferredMin() (int64, bool) {
	at, ok := int64(math.MaxInt64), false
	h := &w.heads[slotDue]
	for t := h.next; t != h; t = t.next {
		at, ok = min(at, w.fireAt(t.state.Load())), true
	}
	return at, ok
}

// handle decides the fate of an unlinked timer t: drop it if stopped, file
// it if its deadline is ahead, fire it if due; and keeps the pending count.
func (w *Wheel) handle(t *Timer, now int64) {
	for {
		s := t.state.Load()
		if s&statePending == 0 {
			if n := s &^ (stateFiled | stateCounted); n != s {
				if !t.state.CompareAndSwap(s, n) {
					continue
				}
				if s&stateCounted != 0 {
					w.addPending(-1)
				}
			}
			return
		}
		if n := s | stateFiled | stateCounted; n != s {
			if !t.state.CompareAndSwap(s, n) {
				continue
			}
			if s&stateCounted == 0 {
				w.addPending(1)
			}
			s = n
		}
		when := s >> whenShift
		if when > w.cur {
			w.link(t, w.slotFor(when), s)
			return
		}
		if w.manual == nil && w.fireAt(s) > now {
			w.link(t, slotDue, s)
			return
		}
		if t.state.CompareAndSwap(s, s&^(statePending|stateFiled|stateCounted)) {
			w.addPending(-1)
			w.fired++
			if w.exec != nil {
				w.exec(t.f)
			} else {
				t.f()
			}
			return
		}
	}
}

// countStops runs as the driver exits, after Stop: it takes in the stops
// still in the inbox, so that Len counts only the timers that were pending
// when the wheel stopped. It fires nothing and links nothing.
func (w *Wheel) countStops() {
	for i := range w.inbox {
		for t := w.inbox[i].head.Swap(nil); t != nil; {
			next := t.qnext
			t.qnext = nil
			for {
				s := t.state.Load()
				n := s &^ stateQueued
				if s&statePending == 0 {
					n &^= stateCounted
				}
				if t.state.CompareAndSwap(s, n) {
					if s&statePending == 0 && s&stateCounted != 0 {
						w.addPending(-1)
					}
					break
				}
			}
			t = next
		}
	}
}

func (w *Wheel) addPending(d int64) {
	w.npending += d
	w.count.Store(w.npending)
}

// slotFor returns the slot for a deadline after cur: the level is that of
// the highest 6-bit digit in which when and cur differ.
func (w *Wheel) slotFor(when uint64) int {
	l := (63 - bits.LeadingZeros64(when^w.cur)) / slotBits
	return l*slotsPerLevel + int(when>>(uint(l)*slotBits))&(slotsPerLevel-1)
}

// link files t, in state s, in slot idx.
func (w *Wheel) link(t *Timer, idx int, s uint64) {
	h := &w.heads[idx]
	t.prev = h
	t.next = h.next
	h.next.prev = t
	h.next = t
	if idx < slotDue {
		l, bit := idx/slotsPerLevel, uint64(1)<<(idx%slotsPerLevel)
		w.occupied[l] |= bit
		if s&stateExact == 0 {
			w.coarse[l] |= bit
		}
	}
}

// emptied clears the bitmap bits of slot idx, which holds no timer now.
func (w *Wheel) emptied(idx int) {
	if idx < slotDue {
		l, bit := idx/slotsPerLevel, uint64(1)<<(idx%slotsPerLevel)
		w.occupied[l] &^= bit
		w.coarse[l] &^= bit
	}
}

func (w *Wheel) unlink(t *Timer) {
	p, n := t.prev, t.next
	p.next = n
	n.prev = p
	t.next, t.prev = nil, nil
	if p == n && p.w == nil { // only the sentinel is left: the slot is empty
		w.emptied(int(p.state.Load()))
	}
}
