package wheel

import (
	"math"
	"sync/atomic"
	"time"
)

// parker is where the driver waits for its next wake-up: on the runtime's
// timer and a channel, or in futex on Linux for a precise sleep (a
// runtime-timer sleep ends 0-1 ms late, a futex sleep within tens of µs)
// and, with WithSyscallSleep, for every sleep.
type parker struct {
	// Shared (wake on any goroutine; take and sleep on the driver's),
	// accessed atomically (and through futex); ch is a channel. The rest is
	// written by init and belongs to the driver.
	state    atomic.Uint32 // 1 while a wake-up is pending
	ch       chan struct{}
	timer    *time.Timer
	syscalls bool // sleep in futex
	precise  bool // precise sleeps are in futex (wake must reach both)
	osState  parkOS
}

func (p *parker) init(syscalls bool) {
	p.ch = make(chan struct{}, 1)
	p.timer = time.NewTimer(time.Hour)
	p.timer.Stop()
	p.syscalls = syscalls && haveFutex
	p.precise = haveFutex
}

// wake makes the driver's current or next sleep return. It never blocks;
// only the first wake after the driver took the previous one does work (a
// channel send, a futex wake-up, or, where precise sleeps are in futex,
// both).
func (p *parker) wake() {
	if p.state.Swap(1) == 0 {
		if p.syscalls || p.precise {
			p.osWake()
		}
		if !p.syscalls {
			select {
			case p.ch <- struct{}{}:
			default:
			}
		}
	}
}

// take reports whether a wake-up is pending, and consumes it.
func (p *parker) take() bool {
	if !p.syscalls {
		select {
		case <-p.ch:
		default:
		}
	}
	return p.state.Swap(0) == 1
}

// sleep waits until now() reaches until (forever for math.MaxInt64) or wake
// is called, and reports whether it was woken. It never returns before
// until unless woken. A precise sleep is taken in futex where there is one.
func (p *parker) sleep(until int64, now func() int64, precise bool) bool {
	if p.syscalls || precise && p.precise {
		return p.sleepFutex(until, now)
	}
	for {
		if p.take() {
			return true
		}
		if until == math.MaxInt64 {
			<-p.ch
			continue
		}
		d := until - now()
		if d <= 0 {
			return false
		}
		p.timer.Reset(time.Duration(d))
		select {
		case <-p.timer.C:
		case <-p.ch: // wake stored state before sending: take sees it
			p.timer.Stop()
		}
	}
}
