// Package lagmeter measures how long the test process waited for the CPU,
// so that a test on the real clock can bound lateness by what it saw
// rather than by what a quiet machine would give.
//
// A goroutine asks to wake every Period and adds up how late it woke,
// beyond a floor of noise: when the process (or the Go scheduler's queue
// in it) is kept from running, the sampler is kept waiting too, and its
// lateness adds up to the time every other goroutine lost. On a quiet
// machine Stalled stays near zero, so a bound of base + Slack is as tight
// as base; on a machine whose other processes take the CPU it grows with
// the time the test really lost.
//
// Use it for upper bounds on lateness only. A lower bound (a timer never
// fires early) needs no allowance and must not get one. Do not use it in a
// benchmark: the sampler costs a wake-up a millisecond.
package lagmeter

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Period is how often the sampler asks to wake.
const Period = time.Millisecond

// Floor is the lateness of one wake counted as noise, not as a stall: a
// timer's wake on an idle machine is late by tens of microseconds, and by
// some hundreds under the race detector.
const Floor = time.Millisecond

// Meter measures the scheduling lag of the process from Start to Stop.
//
// Ownership: the sampler goroutine writes stalled and worst; any goroutine
// reads them through their atomics. Stop closes done and waits for the
// sampler.
type Meter struct {
	done    chan struct{}
	stop    sync.Once
	wg      sync.WaitGroup
	stalled atomic.Int64 // ns: sum of each wake's lateness beyond Floor
	worst   atomic.Int64 // ns: the latest single wake
}

// Start starts a meter; Stop ends it. It costs one goroutine that wakes
// every Period.
func Start() *Meter {
	m := &Meter{done: make(chan struct{})}
	m.wg.Go(m.loop)
	return m
}

// New starts a meter for the test t and stops it when t and its subtests
// finish.
func New(t interface{ Cleanup(func()) }) *Meter {
	m := Start()
	t.Cleanup(m.Stop)
	return m
}

func (m *Meter) loop() { Sample(m.done, m.record) }

// Sample asks to wake every Period until done is closed, and passes record
// how late each wake came (never negative), measured behind the process's
// runnable goroutines. It runs on the caller's goroutine; the harness's
// lag monitor (loadtest/internal/lag) samples with it too.
func Sample(done <-chan struct{}, record func(late time.Duration)) {
	tm := time.NewTimer(Period)
	defer tm.Stop()
	want := time.Now().Add(Period)
	for {
		select {
		case <-done:
			return
		case <-tm.C:
		}
		// Behind the process's runnable goroutines: a timer's goroutine
		// runs first on its P and would not see the queue.
		runtime.Gosched()
		now := time.Now()
		record(max(now.Sub(want), 0))
		want = now.Add(Period)
		tm.Reset(Period)
	}
}

// record adds one wake's lateness. Only the sampler calls it.
func (m *Meter) record(late time.Duration) {
	if late > Floor {
		m.stalled.Add(int64(late - Floor))
	}
	if int64(late) > m.worst.Load() {
		m.worst.Store(int64(late))
	}
}

// Stalled returns the time the sampler lost since Start: the sum of its
// wakes' lateness beyond Floor. Safe from any goroutine.
func (m *Meter) Stalled() time.Duration { return time.Duration(m.stalled.Load()) }

// Worst returns the lateness of the latest single wake since Start. Safe
// from any goroutine.
func (m *Meter) Worst() time.Duration { return time.Duration(m.worst.Load()) }

// Slack returns base plus twice the time stalled since Start: an upper
// bound on the lateness of something that takes base on a quiet machine.
// Twice, because the sampler and the goroutines it stands for run on
// different threads, each of which waits for a CPU of its own. Safe from
// any goroutine.
func (m *Meter) Slack(base time.Duration) time.Duration { return base + 2*m.Stalled() }

// Stop ends the meter and waits for its goroutine. It may be called more
// than once; the figures stay readable.
func (m *Meter) Stop() {
	m.stop.Do(func() { close(m.done) })
	m.wg.Wait()
}
