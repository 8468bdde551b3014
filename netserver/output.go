package netserver

import (
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// outWatch is what watchOutput keeps about a connection's queued output.
// It is allocated (with a closure for its timer) the first time output
// stays queued after a write, that is when the peer reads more slowly than
// it is sent to, and kept for the connection's life, so that a connection
// whose output queues now and then does not allocate each time. It belongs
// to the event loop, except timer, which keeps its own rules.
type outWatch struct {
	timer wheel.Timer // fires every outputLook while output is queued
	// written counts the bytes handed to gnet since the watch began, with
	// what was queued then; written minus gnet's outbound buffer is what
	// has drained to the socket since.
	written   uint64
	stall     idle.WriteStall // whether output is queued, and its progress
	softSince time.Duration   // when queued output was first seen above OutputSoft
	aboveSoft bool            // queued output was above OutputSoft when last looked
}

// claimOutput makes c the owner of its loop's output buffer, writing out
// first what the buffer holds for another connection (a handler may Send to
// several connections of its loop in one event), and returns the loop,
// whose out then takes c's output.
func (c *Conn) claimOutput() *loop {
	l := c.l
	if l.owner != c {
		if prev := l.owner; prev != nil {
			prev.flush()
		}
		l.owner = c
	}
	return l
}

// flushOwner writes out whatever the loop's output buffer holds, to the
// connection it is for. Every event ends with it.
func (l *loop) flushOwner() {
	if o := l.owner; o != nil {
		o.flush()
	}
}

// flush writes what the loop's buffer holds for c, if anything, unless that
// would take c's queued output over the hard limit (then c closes with
// ReasonOutputLimit and the bytes are dropped). gnet's Write closes the
// connection (calling OnClose) if the socket fails.
func (c *Conn) flush() {
	l := c.l
	if l.owner != c {
		return
	}
	l.owner = nil
	if len(l.out) == 0 || c.closed {
		l.trimOut()
		return
	}
	if queued := c.gc.OutboundBuffered() + len(l.out); queued > c.s.lim.outputHard {
		l.trimOut()
		c.overOutput(queued)
		return
	}
	_, _ = c.gc.Write(l.out)
	if c.outWatch != nil {
		c.outWatch.written += uint64(len(l.out))
	}
	l.trimOut()
	if !c.closed {
		c.watchOutput(l.clock(), false)
	}
}

// maxKeptOut is the most output buffer a loop keeps between events.
const maxKeptOut = 256 << 10

// trimOut empties the loop's output buffer, letting it go if one event
// grew it past maxKeptOut.
func (l *loop) trimOut() {
	if cap(l.out) > maxKeptOut {
		l.out = nil
		return
	}
	l.out = l.out[:0]
}

// overOutput closes c for queued output over its limit: queued bytes would
// be queued. No CLOSE frame is sent: it would wait behind what the peer is
// not reading.
func (c *Conn) overOutput(queued int) {
	c.closeOutputLimit("netserver: output limit: closing a connection that does not read",
		"queued_bytes", queued, "hard_limit", c.s.lim.outputHard,
		"soft_limit", c.s.lim.outputSoft, "soft_for", c.s.lim.outputSoftFor.String())
}

// closeOutputLimit logs msg with attrs and closes c with ReasonOutputLimit,
// without a CLOSE frame.
func (c *Conn) closeOutputLimit(msg string, attrs ...any) {
	if c.closing {
		return
	}
	c.s.log.Warn(msg, append([]any{"remote", remote(c)}, attrs...)...)
	c.sentClose = true
	c.closeWith(ReasonOutputLimit)
}

// watchOutput looks at c's queued output at now, on the loop: after every
// write and, with look set, whenever c.outWatch's timer fires while output is
// queued (the first write that leaves output queued allocates c.outWatch). It
// closes c with ReasonWriteStall when the output has made no progress for
// the write-stall timeout, and with ReasonOutputLimit when it has stayed
// above OutputSoft for OutputSoftFor; otherwise, while output is queued, it
// arms c.outWatch's timer to look again.
//
// The write stall is idle.WriteStall's to decide. Progress is a queued
// byte leaving for the socket or, when looking (one getsockopt, on Linux),
// the peer acknowledging bytes (see WriteStall.Acked). Progress is seen only
// when looked for, so a close comes at least the timeout after the last
// progress (never early) and at most a quarter of it later.
func (c *Conn) watchOutput(now time.Duration, look bool) {
	s := c.s
	stall, softFor := s.stallTimeout, s.lim.outputSoftFor
	if stall <= 0 && softFor <= 0 {
		return
	}
	queued := c.gc.OutboundBuffered()
	o := c.outWatch
	if queued == 0 {
		if o != nil && o.stall.Pending() {
			o.stall.Empty()
			o.aboveSoft = false
			o.timer.Stop()
		}
		return
	}
	if o == nil {
		// Output stays queued for the first time: watch it from here,
		// counting what is queued as written.
		o = &outWatch{written: uint64(queued)}
		o.timer.Init(s.wheel, func() { c.post(evOutput) })
		c.outWatch = o
	}
	o.stall.Queued(now, o.written-uint64(queued))
	if look && stall > 0 {
		if acked, ok := bytesAcked(c.gc.Fd()); ok {
			o.stall.Acked(now, acked)
		}
	}
	switch {
	case queued <= s.lim.outputSoft:
		o.aboveSoft = false
	case !o.aboveSoft:
		o.aboveSoft, o.softSince = true, now
	}
	// Only a look closes for a stall: it has read what the peer
	// acknowledged, which a write's look-in does not.
	if look && o.stall.Stalled(now, stall) {
		c.closeWith(ReasonWriteStall)
		return
	}
	if o.aboveSoft && softFor > 0 && now-o.softSince >= softFor {
		c.closeOutputLimit("netserver: soft output limit held too long: closing a connection that reads too slowly",
			"queued_bytes", queued, "soft_limit", s.lim.outputSoft,
			"above_for", (now - o.softSince).String(), "soft_for", softFor.String())
		return
	}
	if !o.timer.Pending() {
		o.timer.ResetFrom(now, s.outputLook)
	}
}
