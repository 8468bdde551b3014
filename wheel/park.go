package wheel

import (
	"math"
	"sync/atomic"
	"time"
)

// parker is where the driver waits for its next tick or for a wake-up. It
// has two ways to sleep, and picks the one that wakes the driver on time
// without taking a P from anyone.
//
// On the runtime's timer (with a channel for wake-ups) the sleeping
// goroutine gives its P back, but the timer belongs to a P, and an event
// loop that waits in epoll_wait (as gnet's loops do) keeps its P while it
// waits: a timer on that P runs only when the loop next passes through the
// scheduler or when the runtime's monitor takes the P back, up to two polls
// of up to 10 ms each. With every P held by a loop waiting for traffic that
// does not come, a 1 ms sleep ends about 10 ms late.
//
// In futex (Linux) the kernel wakes the thread on time, but the goroutine
// keeps its P while it sleeps, so a loop that wakes meanwhile may have to
// wait for the monitor to free a P for it: when the loops are busy, futex
// sleeps cost them latency.
//
// So the driver sleeps on the runtime's timer, and measures how late each
// such sleep ended. One that ended more than lateNanos late switches it to
// futex for the next futexSpell sleeps, after which it tries the timer
// again. Busy loops pass through the scheduler often and keep the timer on
// time; idle loops make it late and get futex sleeps, when they need their
// Ps least. Without futex (other systems) it always uses the timer.
//
// Ownership: state is shared (wake on any goroutine; take and sleep on the
// driver's) and accessed atomically; ch is a channel. The rest belongs to
// the driver, except the counters, which tests read atomically.
type parker struct {
	state atomic.Uint32 // 1 while a wake-up is pending
	ch    chan struct{}
	timer *time.Timer

	lateNanos  int64 // a timer sleep this late switches to futex
	futexSpell int   // futex sleeps per switch
	futexLeft  int   // futex sleeps still to take
	osState    parkOS

	switches atomic.Uint64 // switches to futex, for tests and benchmarks
}

func (p *parker) init(lateNanos int64, futexSpell int) {
	p.ch = make(chan struct{}, 1)
	p.timer = time.NewTimer(time.Hour)
	p.timer.Stop()
	p.lateNanos, p.futexSpell = lateNanos, futexSpell
}

// wake makes the driver's current or next sleep return. It never blocks;
// only the first wake after the driver took the previous one does work (a
// channel send, and a futex wake-up).
func (p *parker) wake() {
	if p.state.Swap(1) == 0 {
		select {
		case p.ch <- struct{}{}:
		default:
		}
		p.osWake()
	}
}

// take reports whether a wake-up is pending, and consumes it.
func (p *parker) take() bool {
	select {
	case <-p.ch:
	default:
	}
	return p.state.Swap(0) == 1
}

// sleep waits until now() reaches until (forever for math.MaxInt64) or wake
// is called, and reports whether it was woken.
func (p *parker) sleep(until int64, now func() int64) bool {
	if p.futexLeft > 0 && haveFutex {
		p.futexLeft--
		return p.sleepFutex(until, now)
	}
	woken := p.sleepTimer(until, now)
	if !woken && until != math.MaxInt64 && haveFutex {
		p.timerWoke(now() - until)
	}
	return woken
}

// timerWoke accounts for a timer sleep that ended late nanoseconds after
// its deadline.
func (p *parker) timerWoke(late int64) {
	if late > p.lateNanos {
		p.futexLeft = p.futexSpell
		p.switches.Add(1)
	}
}

func (p *parker) sleepTimer(until int64, now func() int64) bool {
	if p.take() {
		return true
	}
	if until == math.MaxInt64 {
		<-p.ch
		return p.take()
	}
	d := until - now()
	if d <= 0 {
		return false
	}
	p.timer.Reset(time.Duration(d))
	select {
	case <-p.timer.C:
	case <-p.ch:
		p.timer.Stop()
	}
	return p.take()
}
