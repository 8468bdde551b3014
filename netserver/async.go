package netserver

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// SendAsync is Send from any goroutine. It copies msg and hands the send to
// the connection's event loop, where it runs as Send does and is written
// out at once. Sends and closes that one goroutine hands over with
// SendAsync and CloseAsync run in the order it made them. It returns
// ErrClosed once the connection is closing or closed (whoever closed it:
// the peer, the handler, a timeout, CloseAsync) or the server has stopped;
// a connection that closes after the call, before the send runs, drops it. Where Send would fail for a limit, the connection is
// closed instead: ErrUnackedLimit with ReasonUnackedLimit (ErrOutputLimit
// closes it anyway), since nobody is there to decide. The bytes handed over
// and not yet sent count as queued output: SendAsync returns
// ErrOutputLimit, and the connection closes with ReasonOutputLimit, when
// they would pass Limits.OutputHard, so a producer faster than the loop
// cannot grow the loop's inbox without bound.
//
// Cost: one allocation, for the copy, and a lock of the loop's inbox; the
// call that finds the inbox empty also wakes the loop (gnet's Execute, a
// few more allocations and a write to an eventfd). The loop takes every
// waiting call in one batch, so a busy producer rarely pays for a wake-up.
// A message costs a few µs against Send's tens of ns (docs/perf.md,
// "SendAsync against Send on the loop").
func (c *Conn) SendAsync(msg []byte) error {
	if c.flags.Load()&flagClosing != 0 {
		return ErrClosed
	}
	limit := min(c.s.lim.outputHard, math.MaxInt32-1)
	n := int32(min(len(msg), limit+1))
	if pending := int(c.asyncBytes.Add(n)); pending > limit {
		c.asyncBytes.Add(-n)
		if c.flags.Or(flagOverAsync)&flagOverAsync == 0 {
			_ = c.l.enqueue(asyncTask{c: c, kind: asyncOverOutput, pending: pending})
		}
		return fmt.Errorf("%w: %d bytes handed to SendAsync and not yet sent, limit %d", ErrOutputLimit, pending, limit)
	}
	return c.l.enqueue(asyncTask{c: c, kind: asyncSend, msg: append([]byte(nil), msg...), n: n})
}

// CloseAsync is CloseWith from any goroutine: the close runs on the
// connection's event loop, after the SendAsync calls made before it (a
// lock, and a wake-up as SendAsync). Only the first call hands a close
// over; later ones change nothing, as the first reason stays, and return
// nil until the close has run. It returns ErrClosed once the connection is
// closing or closed, or the server has stopped.
func (c *Conn) CloseAsync(r Reason) error {
	if c.flags.Load()&flagClosing != 0 {
		return ErrClosed
	}
	if c.flags.Or(flagCloseAsync)&flagCloseAsync != 0 {
		if c.s.stopped() {
			return ErrClosed
		}
		return nil
	}
	return c.l.enqueue(asyncTask{c: c, kind: asyncClose, reason: r})
}

// asyncTask is a SendAsync or CloseAsync call waiting in its loop's inbox.
type asyncTask struct {
	c       *Conn
	kind    uint8
	reason  Reason // asyncClose
	n       int32  // asyncSend: bytes of msg counted in c.asyncBytes
	pending int    // asyncOverOutput: the bytes pending when the limit was passed
	msg     []byte // asyncSend: SendAsync's copy
}

// Kinds of asyncTask.
const (
	asyncSend uint8 = iota
	asyncClose
	asyncOverOutput
)

// enqueue appends t to the loop's inbox and, unless the loop's task to run
// the inbox is scheduled already, schedules it. Any goroutine.
//
// The inbox keeps the calls in order. gnet's task queue alone would not:
// once 1024 tasks wait on a loop, its Execute puts the next ones on a
// second queue that runs after whatever arrives on the first meanwhile. One
// task per loop at a time on it keeps the order whatever the backlog.
func (l *loop) enqueue(t asyncTask) error {
	if l.s.stopped() {
		return ErrClosed
	}
	l.inboxMu.Lock()
	l.inbox = append(l.inbox, t)
	if l.inboxScheduled {
		l.inboxMu.Unlock()
		return nil
	}
	l.inboxScheduled = true
	l.inboxMu.Unlock()
	err := l.el.Execute(context.Background(), l.runAsync)
	if err == nil {
		return nil
	}
	// The engine is stopping, and closing every connection: what the
	// inbox holds will not run.
	l.inboxMu.Lock()
	dropped := l.inbox
	l.inbox, l.inboxScheduled = nil, false
	l.inboxMu.Unlock()
	for _, d := range dropped {
		d.c.asyncBytes.Add(-d.n)
	}
	return fmt.Errorf("%w: %w", ErrClosed, err)
}

// maxKeptInbox is the most inbox capacity, in calls, a loop keeps between
// batches.
const maxKeptInbox = 4096

// runAsyncTasks runs on the event loop: it takes the inbox's calls and
// runs them in order, skipping those of connections closed since, and
// writes out what they produced (one write per connection of a run of
// calls for it).
func (l *loop) runAsyncTasks(context.Context) error {
	l.inboxMu.Lock()
	batch := l.inbox
	l.inbox, l.inboxSpare = l.inboxSpare[:0], nil
	l.inboxScheduled = false
	l.inboxMu.Unlock()
	for i := range batch {
		t := &batch[i]
		c := t.c
		c.asyncBytes.Add(-t.n)
		if !c.closed && !c.closing {
			l.s.safely(c, t.run)
		}
		*t = asyncTask{} // let the message and the connection go
	}
	l.flushOwner()
	if cap(batch) <= maxKeptInbox {
		l.inboxSpare = batch[:0]
	}
	return nil
}

// run runs the call t stands for, on c's event loop.
func (t *asyncTask) run() {
	c := t.c
	switch t.kind {
	case asyncSend:
		if err := c.Send(t.msg); errors.Is(err, ErrUnackedLimit) {
			c.closeWith(ReasonUnackedLimit)
		}
	case asyncClose:
		c.CloseWith(t.reason)
	case asyncOverOutput:
		c.overOutput(t.pending)
	}
}
