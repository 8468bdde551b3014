package attack

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// This file holds the quiet connections' barrier and their turns to send
// their last message, spread over a window.

// barrier waits until every connection has dialed (successfully or not) or
// the timeout passes, then closes released (the quiet connections' turns
// then let them go one at a time, see turns). arrive may be called from any
// goroutine, once per connection; released is closed once.
//
// Ownership: left and arrived are guarded by mu; at and timedOut are
// written under mu before released is closed and read after <-released;
// before is set by newBarrier.
type barrier struct {
	mu       sync.Mutex
	left     int
	arrived  int
	released chan struct{}
	at       time.Time
	timedOut bool
	timer    *time.Timer
	before   func() // nil, or run under mu just before the release
}

// newBarrier returns a barrier awaiting n arrivals, released at the latest
// after timeout. before, if not nil, runs just before the release, its
// time counted in the wait (Barrier.Wait).
func newBarrier(n int, timeout time.Duration, before func()) *barrier {
	b := &barrier{left: n, released: make(chan struct{}), before: before}
	b.mu.Lock()
	b.timer = time.AfterFunc(timeout, func() { b.release(true) })
	b.mu.Unlock()
	if n <= 0 {
		b.release(false)
	}
	return b
}

func (b *barrier) arrive() {
	b.mu.Lock()
	b.arrived++
	b.left--
	last := b.left == 0
	b.mu.Unlock()
	if last {
		b.release(false)
	}
}

func (b *barrier) release(timedOut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.released:
		return
	default:
	}
	if b.before != nil {
		b.before()
	}
	b.at, b.timedOut = time.Now(), timedOut
	b.timer.Stop()
	close(b.released)
}

// sendOffset is how long after the release quiet connection i of n sends
// its last message: spread evenly over [0, spread).
func sendOffset(spread time.Duration, i, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(float64(spread) * float64(i) / float64(n))
}

// turns lets the quiet connections go one at a time, each at its
// sendOffset in the spread window, rather than all at the barrier's release: 8 000
// goroutines woken at once queue the first senders' readers behind them
// for tens of milliseconds, which the reap figures would charge to the
// server. One goroutine (run) closes each connection's channel at its
// time.
//
// Ownership: ch and order are written by newTurns and only read after.
type turns struct {
	b     *barrier
	ch    map[string][]chan struct{} // scenario -> connection -> its turn (nil: not quiet)
	order []turn                     // every quiet connection's turn, earliest first
}

type turn struct {
	off time.Duration // from the release
	ch  chan struct{}
}

// newTurns returns the turns of cfg's quiet connections, released from b
// and spread over cfg.IdleSpread.
func newTurns(b *barrier, cfg Config) *turns {
	t := &turns{b: b, ch: map[string][]chan struct{}{}}
	for _, s := range cfg.Scenarios {
		n := cfg.Conns[s]
		for i := range n {
			if !scenario.Lookup(s).Quiet(i) {
				continue
			}
			if t.ch[s] == nil {
				t.ch[s] = make([]chan struct{}, n)
			}
			c := make(chan struct{})
			t.ch[s][i] = c
			t.order = append(t.order, turn{off: sendOffset(cfg.IdleSpread, i, n), ch: c})
		}
	}
	slices.SortStableFunc(t.order, func(a, b turn) int { return cmp.Compare(a.off, b.off) })
	return t
}

// of returns the channel closed at quiet connection i of scenario s's turn;
// nil (which blocks forever) if that connection is not quiet.
func (t *turns) of(s string, i int) <-chan struct{} {
	if cs := t.ch[s]; i >= 0 && i < len(cs) {
		return cs[i]
	}
	return nil
}

// collectGarbage runs before the quiet barrier's release: the heap has
// just grown by the connections' buffers, and a collection triggered in the
// spread window would pause this client's reads and sends for tens of
// milliseconds and be charged to the server's reaps. After this one the
// heap's goal is twice what the connections hold, which the allocation-free
// echo path does not reach before they close. (Scenarios that run beside
// the quiet ones, echo say, pause for it once; the barrier's wait counts
// it.)
func collectGarbage() { runtime.GC() }

// run waits for the release and closes each turn's channel at its time; it
// returns when all are closed or ctx ends.
func (t *turns) run(ctx context.Context) {
	select {
	case <-t.b.released:
	case <-ctx.Done():
		return
	}
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for _, u := range t.order {
		if d := time.Until(t.b.at.Add(u.off)); d > 0 {
			tm.Reset(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				return
			}
		}
		close(u.ch)
	}
}
