package netserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// loop is the server's state for one gnet event loop.
//
// Ownership: head and scheduled are shared (timer callbacks push, the loop
// pops). inbox and inboxScheduled are shared under inboxMu (any goroutine
// appends, the loop takes). Everything else belongs to the loop's
// goroutine.
type loop struct {
	s         *Server
	el        gnet.EventLoop
	head      atomic.Pointer[Conn]
	scheduled atomic.Bool
	run       gnet.RunnableFunc

	inboxMu        sync.Mutex
	inbox          []asyncTask // SendAsync and CloseAsync calls not run yet, in call order
	inboxScheduled bool        // runAsync is on gnet's task queue: appending need not schedule it
	inboxSpare     []asyncTask // the loop's: the last batch's slice, reused as the next inbox
	runAsync       gnet.RunnableFunc

	out     []byte        // output batched in the running event, for owner; see trimOut for its bound
	owner   *Conn         // the connection out holds output for
	inEvent *Conn         // the connection whose OnOpen or OnTraffic is running: it closes by returning gnet.Close
	now     time.Duration // the wheel's exact clock at the start of the running event; see clock
	conns   []*Conn       // the open connections, each at its slot; see addConn
	peeks   atomic.Int64  // framed inbound buffers looked at; written by the loop, read by tests
}

// readClock starts an OnOpen or OnTraffic call of the loop: it reads the
// wheel's clock, once, for everything the event stamps or arms (see
// clock), and returns it.
func (l *loop) readClock() time.Duration {
	l.now = l.s.wheel.Now()
	return l.now
}

// clock returns the time to stamp events and arm timers with, on the loop:
// inside an OnOpen or OnTraffic call, the time read at its start; outside
// one (a task the wheel handed over), the time now. One clock read per
// event (about 26 ns here) serves every stamp and arming in it
// (docs/design.md).
func (l *loop) clock() time.Duration {
	if l.inEvent != nil {
		return l.now
	}
	return l.s.wheel.Now()
}

func (s *Server) loopFor(el gnet.EventLoop) *loop {
	s.loopsMu.Lock()
	defer s.loopsMu.Unlock()
	if l, ok := s.byEL[el]; ok {
		return l
	}
	l := &loop{s: s, el: el}
	l.run = l.runExpiries
	l.runAsync = l.runAsyncTasks
	s.byEL[el] = l
	loops := append(append([]*loop(nil), *s.loops.Load()...), l)
	s.loops.Store(&loops)
	return l
}

// addConn adds c to the loop's open connections, at the end. O(1)
// amortized; a slice of pointers with an index in each Conn costs a
// connection about 10 bytes where a map[*Conn] cost 20 to 35. On the loop.
func (l *loop) addConn(c *Conn) {
	c.slot = int32(len(l.conns))
	l.conns = append(l.conns, c)
}

// minShrink is the capacity below which the loop's slice of connections
// is not shrunk.
const minShrink = 1024

// removeConn removes c from the loop's open connections, moving the last
// one to its slot, and lets most of the slice go once a quarter of it is
// in use, so that a burst of connections does not hold memory after it
// ends. O(1) amortized. On the loop.
func (l *loop) removeConn(c *Conn) {
	i, last := int(c.slot), len(l.conns)-1
	if i > last || l.conns[i] != c {
		return // not added (it never opened fully)
	}
	moved := l.conns[last]
	l.conns[i], moved.slot = moved, int32(i)
	l.conns[last] = nil
	l.conns = l.conns[:last]
	if cap(l.conns) >= minShrink && len(l.conns) < cap(l.conns)/4 {
		l.conns = append(make([]*Conn, 0, cap(l.conns)/2), l.conns...)
	}
}

// Expiry events, handed from the wheel's goroutine to the event loop.
const (
	evClose uint32 = 1 << iota
	evProbe
	evRetransmit
	evGoAway
	evOutput
)

// Bits of Conn.flags.
const (
	// flagQueued: c is on its loop's list of connections with events
	// (post sets it, the loop clears it as it takes c off).
	flagQueued = 1 << iota
	// flagOverAsync: a SendAsync refused for the output limit has handed
	// the close to the loop; the refusals that follow hand over nothing.
	flagOverAsync
	// flagCloseAsync: a CloseAsync has handed its close to the loop.
	flagCloseAsync
	// flagClosing: c is closing or closed (c.closing, c.closed), for
	// SendAsync and CloseAsync, which may not read those.
	flagClosing
	// flagCut: Shutdown's deadline passed before c finished (cutConn).
	flagCut
	// flagSourceCounted: c holds a place in its source's count
	// (countSource); the loop sets it once, and releases it as c closes.
	flagSourceCounted
	// flagNoHandler: the handler's OnOpen has not run (c awaits its PROXY
	// header), so neither does its OnClose.
	flagNoHandler
)

// post hands events to the event loop. Any goroutine; allocation-free.
func (c *Conn) post(ev uint32) {
	c.pending.Or(ev)
	if c.flags.Or(flagQueued)&flagQueued == 0 {
		l := c.l
		for {
			h := l.head.Load()
			c.next = h
			if l.head.CompareAndSwap(h, c) {
				return
			}
		}
	}
}

func (c *Conn) postClose(r Reason) {
	c.timeoutReason.CompareAndSwap(0, uint32(r))
	c.post(evClose)
}

// handOff runs on the wheel's goroutine after each batch of expiries: one
// Execute per event loop that has expired connections.
func (s *Server) handOff() {
	for _, l := range *s.loops.Load() {
		if l.head.Load() != nil && l.scheduled.CompareAndSwap(false, true) {
			if err := l.el.Execute(context.Background(), l.run); err != nil {
				// Shutting down: the engine closes every connection (OnClose
				// stops its timers); what stays on the list is never run.
				l.scheduled.Store(false)
			}
		}
	}
}

// runExpiries runs on the event loop: it takes every connection the wheel
// handed over and acts on its expiries. A connection closed since is skipped.
func (l *loop) runExpiries(context.Context) error {
	l.scheduled.Store(false)
	c := l.takeExpired()
	for c != nil {
		next := c.next
		c.next = nil
		c.flags.And(^uint32(flagQueued))
		ev := c.pending.Swap(0)
		if !c.closed && !c.closing {
			l.s.expiries.Add(1)
			l.s.safely(c, func() { c.handleEvents(ev) })
		}
		c = next
	}
	return nil
}

// takeExpired empties the loop's list of expired connections and returns
// it in the order the wheel handed them over. The list is a stack (each
// post pushes on its head), so it is reversed: under a burst of expiries the
// first connection due is closed first, not after every later one.
func (l *loop) takeExpired() *Conn {
	var first *Conn
	for c := l.head.Swap(nil); c != nil; {
		next := c.next
		c.next = first
		first, c = c, next
	}
	return first
}

// handleEvents runs the expiries handed over by the wheel, on the loop.
func (c *Conn) handleEvents(ev uint32) {
	s := c.s
	if ev&evClose != 0 {
		if due, ok := c.timeouts.Due(); ok {
			s.metrics.late.Observe((s.wheel.Now() - due).Seconds())
		}
		r := Reason(c.timeoutReason.Load())
		if r == ReasonMaxAge && c.away == ReasonShutdown {
			r = ReasonShutdown // the peer was told the shutdown's GOAWAY last
		}
		c.closeWith(r)
		return
	}
	if ev&evOutput != 0 {
		if c.watchOutput(c.l.clock(), true); c.closing {
			return
		}
	}
	if ev&evGoAway != 0 {
		// Max age reached: tell the peer now; the close follows once it
		// has finished, or after the grace.
		c.goAway(ReasonMaxAge, s.idleCfg.MaxAgeGrace)
	}
	if ev&evProbe != 0 {
		s.probes.Add(1)
		s.proto.probe(c)
	}
	if ev&evRetransmit != 0 {
		s.proto.retransmit(c)
	}
	c.l.flushOwner()
}
