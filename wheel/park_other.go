//go:build !linux

package wheel

import (
	"math"
	"time"
)

// parker is where the driver waits for its next tick or for a wake-up: a
// runtime timer and a channel. (On Linux the driver sleeps in futex instead;
// see park_linux.go for why.)
//
// Ownership: ch is shared (wake sends on any goroutine); timer is the
// driver's.
type parker struct {
	ch    chan struct{}
	timer *time.Timer
}

func (p *parker) init() {
	p.ch = make(chan struct{}, 1)
	p.timer = time.NewTimer(time.Hour)
	p.timer.Stop()
}

// wake makes the driver's current or next sleep return. It never blocks.
func (p *parker) wake() {
	select {
	case p.ch <- struct{}{}:
	default:
	}
}

// take reports whether a wake-up is pending, and consumes it.
func (p *parker) take() bool {
	select {
	case <-p.ch:
		return true
	default:
		return false
	}
}

// sleep waits until now() reaches until (forever for math.MaxInt64) or wake
// is called, and reports whether it was woken.
func (p *parker) sleep(until int64, now func() int64) bool {
	if until == math.MaxInt64 {
		<-p.ch
		return true
	}
	d := until - now()
	if d <= 0 {
		return p.take()
	}
	p.timer.Reset(time.Duration(d))
	select {
	case <-p.timer.C:
		return false
	case <-p.ch:
		p.timer.Stop()
		return true
	}
}
