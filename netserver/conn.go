package netserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// Handler is the protocol a user writes against a Server. Its methods run on
// the connection's event loop, one at a time per connection, and must not
// block. A panic in any of them closes that connection with ReasonPanic; the
// server keeps serving the others.
type Handler interface {
	// OnOpen is called when a connection is accepted.
	OnOpen(c *Conn)
	// OnMessage delivers inbound data: with Framed, the payload of one DATA
	// frame (each exactly once, in order); with Raw, the bytes that
	// arrived. msg is valid only during the call.
	OnMessage(c *Conn, msg []byte)
	// OnClose is called once when the connection closes, with the reason.
	// The Conn must not be used afterwards.
	OnClose(c *Conn, r Reason)
}

// StreamHandler may be implemented by a Raw protocol's Handler that parses
// its own messages: OnStream is then called instead of OnMessage. in holds
// every inbound byte not consumed yet, what earlier calls left followed by
// what arrived since, and OnStream returns how many of them, from the
// front, it consumed (clamped to [0, len(in)]); the rest stays buffered and
// comes again, with more, on the next call. At most Config.MaxFrame bytes
// (default 64 KiB) may be left: more closes the connection with
// ReasonTooLarge. in is valid only during the call; the cost of a call is
// one copy of what was left when more arrives, so parse whole messages
// rather than leave a large one to grow a byte at a time. Called on the
// connection's event loop.
type StreamHandler interface {
	OnStream(c *Conn, in []byte) (consumed int)
}

// Prober must be implemented by a Raw Handler when Timeouts.KeepaliveTime
// is set: OnProbe is called, on the connection's event loop, each time a
// keepalive probe is due, and sends the protocol's own (a "PING" line, an
// empty message), typically with Send. Any inbound byte answers it.
type Prober interface {
	OnProbe(c *Conn)
}

// Echo is a Handler that sends every message back.
type Echo struct{}

// OnOpen does nothing.
func (Echo) OnOpen(*Conn) {}

// OnMessage sends msg back. If the peer has too much unacknowledged data
// (Limits.UnackedBytes, or the retransmission window) the connection closes
// with ReasonUnackedLimit rather than drop the echo; if its queued output
// would pass Limits.OutputHard, Send has closed it with ReasonOutputLimit.
func (Echo) OnMessage(c *Conn, msg []byte) {
	if err := c.Send(msg); errors.Is(err, ErrUnackedLimit) {
		c.CloseWith(ReasonUnackedLimit)
	}
}

// OnClose does nothing.
func (Echo) OnClose(*Conn, Reason) {}

// Errors returned by Send; test them with errors.Is.
var (
	// ErrClosed: the connection is closing or closed.
	ErrClosed = errors.New("netserver: connection closed")
	// ErrOutputLimit: the message would take the connection's queued output
	// over Limits.OutputHard. The connection is closing with
	// ReasonOutputLimit when Send returns it.
	ErrOutputLimit = errors.New("netserver: output limit")
	// ErrUnackedLimit: the peer has too much unacknowledged data, in bytes
	// (Limits.UnackedBytes) or messages (retransmit.Config.Window); the
	// message was not sent. The handler decides: Echo closes with
	// ReasonUnackedLimit rather than drop an echo.
	ErrUnackedLimit = errors.New("netserver: unacknowledged data limit")
)

// Expiry events, handed from the wheel's goroutine to the event loop.
const (
	evClose uint32 = 1 << iota
	evProbe
	evRetransmit
	evDrain
	evOutput
)

// Conn is one connection of a Server. Its methods must be called on the
// connection's event loop, that is from the Handler's methods, unless they
// say otherwise.
//
// Ownership: the fields under "hand-off" are written by timer callbacks on
// the wheel's goroutine and taken by the event loop, atomically (next is
// written by the pusher before it publishes c on the loop's stack). Every
// other field belongs to the event loop. The trackers keep their own rules.
type Conn struct {
	gc  gnet.Conn
	l   *loop
	s   *Server
	ctx any

	idle *idle.Tracker
	f    *framed // the Framed protocol's state; nil with Raw
	// out watches queued output (see watchOutput); nil until output first
	// stays queued after a write, which an idle connection never has.
	out *outWatch

	// hand-off
	events     atomic.Uint32
	hookReason atomic.Uint32
	flags      atomic.Uint32 // flagQueued, flagOverAsync, flagCloseAsync
	// asyncBytes counts the bytes handed to SendAsync and not yet sent,
	// which Limits.OutputHard bounds. Any goroutine adds; the loop
	// subtracts.
	asyncBytes atomic.Int32
	next       *Conn

	// need is how many inbound bytes the frame under way needs before it
	// can be parsed (its header, then its whole length, at most MaxFrame
	// and so within int32): OnTraffic does not look at the buffered bytes
	// again until that many have arrived.
	need int32
	slot int32 // c's index in its loop's conns while open (addConn)

	inFrame   bool
	handshook bool
	sentClose bool
	closing   bool
	closed    bool
	rejected  bool
	reason    Reason
}

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
	written    uint64
	drained    uint64        // drained bytes when last looked
	acked      uint64        // bytes the peer had acknowledged when last looked (bytesAcked)
	progressAt time.Duration // when output was last seen draining, or began to queue
	softSince  time.Duration // when queued output was first seen above OutputSoft
	backlog    bool          // output was queued when last looked
	aboveSoft  bool          // queued output was above OutputSoft when last looked
}

// framed is a Framed connection's protocol state, allocated with its Conn
// (framedConn); a Raw connection has none. It belongs to the event loop,
// except rtx, which keeps its own rules.
type framed struct {
	rtx      retransmit.Tracker
	unacked  unackedQueue  // payloads of DATA sent and not acknowledged
	recvNext uint64        // next DATA sequence number expected from the peer
	sendNext uint64        // sequence number of the next DATA we send
	ackedTo  uint64        // highest sequence number the peer acknowledged
	nonce    uint64        // of the last keepalive PING sent
	pingTAT  time.Duration // when the peer's PINGs would be back within their rate (allowPing)
}

// framedConn puts a Framed connection's Conn and protocol state in one
// allocation.
type framedConn struct {
	Conn
	framed
}

// Send sends msg to the peer: with Framed, as a DATA frame that is kept
// (copied) until acknowledged and retransmitted if need be; with Raw, as
// bytes. Writes are batched until the current event returns. It returns
// ErrClosed on a closing connection; ErrUnackedLimit, sending nothing,
// when the peer has too much unacknowledged data (Limits.UnackedBytes, or
// retransmit.Config.Window messages; the error wraps
// retransmit.ErrWindowFull then); and ErrOutputLimit when the message would
// take the queued output over Limits.OutputHard, in which case the
// connection is closing with ReasonOutputLimit. O(len(msg)),
// allocation-free in steady state. Call it on the connection's event loop.
func (c *Conn) Send(msg []byte) error {
	if c.closing || c.closed {
		return ErrClosed
	}
	l := c.own()
	s := c.s
	size := len(msg)
	if s.cfg.Protocol == Framed {
		size += frame.DataHeaderSize
		if c.f.unacked.bytes()+len(msg) > s.lim.unackedBytes {
			return fmt.Errorf("%w: %d bytes unacknowledged, limit %d", ErrUnackedLimit, c.f.unacked.bytes(), s.lim.unackedBytes)
		}
	}
	if queued := c.gc.OutboundBuffered() + len(l.out); queued+size > s.lim.outputHard {
		c.overOutput(queued + size)
		return fmt.Errorf("%w: %d bytes queued, limit %d", ErrOutputLimit, queued+size, s.lim.outputHard)
	}
	if s.cfg.Protocol == Raw {
		l.out = append(l.out, msg...)
		return nil
	}
	seq := c.f.sendNext
	if err := c.f.rtx.Sent(seq, l.clock()); err != nil {
		return fmt.Errorf("%w: %w", ErrUnackedLimit, err)
	}
	c.f.sendNext++
	c.f.unacked.push(msg)
	l.out = frame.AppendData(l.out, seq, msg)
	return nil
}

// Close closes the connection with ReasonServerClosed (Framed: after a CLOSE
// frame). It is idempotent. Call it on the connection's event loop; from
// elsewhere, CloseAsync.
func (c *Conn) Close() error {
	c.closeWith(ReasonServerClosed)
	return nil
}

// CloseCode closes the connection with ReasonApplication and a code and
// text of the protocol's own: with Framed, the CLOSE frame carries them
// (codes from 1000 up are the application's, docs/protocol.md; code 0
// sends no CLOSE frame; text is cut to 256 bytes and must be UTF-8); with
// Raw nothing is sent. Either way the code and text are logged (info
// level), and that is the only place the server keeps them: OnClose, Stats
// and the metrics see ReasonApplication alone, so a handler that needs the
// code later keeps it itself (SetContext). Idempotent: the first close
// stays. Call it on the connection's event loop.
func (c *Conn) CloseCode(code uint16, text string) {
	if c.closing {
		return
	}
	if len(text) > frame.MaxReasonLen {
		text = strings.ToValidUTF8(text[:frame.MaxReasonLen], "")
	}
	c.s.log.Info("netserver: handler closed a connection", "remote", remote(c), "code", code, "text", text)
	c.closeFrame(ReasonApplication, frame.Code(code), text)
}

// Activity marks application activity now: the idle timeout
// (Timeouts.IdleTimeout) runs again from here. It is what every inbound
// byte does, unless Config.HandlerMarks. O(1); on the event loop.
func (c *Conn) Activity() { c.idle.ActivityAt(c.l.clock()) }

// RequestStart marks the start of a request: Timeouts.FrameTimeout, the
// per-request deadline, runs from now until RequestEnd; a call while a
// request is open does nothing. A request open also keeps a graceful
// Shutdown waiting. O(1); on the event loop.
func (c *Conn) RequestStart() {
	if !c.inFrame {
		c.inFrame = true
		c.idle.FrameStartAt(c.l.clock())
	}
}

// RequestEnd marks the end of the request open, clearing its deadline.
// O(1); on the event loop.
func (c *Conn) RequestEnd() {
	if c.inFrame {
		c.inFrame = false
		c.idle.FrameEnd()
	}
}

// HandshakeDone marks the protocol's handshake done, clearing
// Timeouts.HandshakeTimeout. Idempotent, O(1); on the event loop.
func (c *Conn) HandshakeDone() {
	if !c.handshook {
		c.handshook = true
		c.idle.HandshakeDone()
	}
}

// SendAsync is Send from any goroutine. It copies msg and hands the send to
// the connection's event loop, where it runs as Send does and is written
// out at once. Sends and closes that one goroutine hands over with
// SendAsync and CloseAsync run in the order it made them. It returns
// ErrClosed if the server has stopped; a connection that closes before the
// send runs drops it. Where Send would fail for a limit, the connection is
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
// Measured on loopback (BenchmarkConn_SendAsync, docs/perf.md; 2 shared
// cores, medians of 6): the call takes about 1.1 µs for 64 bytes and
// 3.6 µs for 4 KiB, with 1 allocation per message counting the loop's;
// sustained, the message read by the peer included, about 2.7 µs and 7 µs
// per message, where Send on the loop takes 10 ns and 50 ns in the call
// and 1.1 µs and 1.4 µs sustained, without allocating.
func (c *Conn) SendAsync(msg []byte) error {
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
// over; later ones change nothing, as the first reason stays. It returns
// ErrClosed if the server has stopped.
func (c *Conn) CloseAsync(r Reason) error {
	if c.flags.Or(flagCloseAsync)&flagCloseAsync != 0 {
		if c.s.stopped() {
			return ErrClosed
		}
		return nil
	}
	return c.l.enqueue(asyncTask{c: c, kind: asyncClose, reason: r})
}

// stopped reports whether the server has stopped, its engine ended. Any
// goroutine.
func (s *Server) stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
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

// CloseWith closes the connection with reason r (Framed: after a CLOSE frame
// with r's code), which OnClose and the metrics then report. ReasonNone
// means ReasonServerClosed. It is idempotent: the first reason stays. Call
// it on the connection's event loop.
func (c *Conn) CloseWith(r Reason) {
	if r == ReasonNone || int(r) >= numReasons {
		r = ReasonServerClosed
	}
	c.closeWith(r)
}

// RemoteAddr reports the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.gc.RemoteAddr() }

// Context returns the value set by SetContext.
func (c *Conn) Context() any { return c.ctx }

// SetContext attaches a value of the handler's to the connection.
func (c *Conn) SetContext(v any) { c.ctx = v }

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
)

// post hands events to the event loop. Any goroutine; allocation-free.
func (c *Conn) post(ev uint32) {
	c.events.Or(ev)
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
	c.hookReason.CompareAndSwap(0, uint32(r))
	c.post(evClose)
}

// closeWith starts closing c for r: a CLOSE frame (Framed) is queued and the
// output flushed. Called on the loop outside OnTraffic, it closes at once;
// inside OnTraffic, OnTraffic returns gnet.Close.
func (c *Conn) closeWith(r Reason) {
	c.closeFrame(r, closeCode(r), r.String())
}

// closeFrame is closeWith with the CLOSE frame's code and text (Framed; a
// zero code sends none).
func (c *Conn) closeFrame(r Reason, code frame.Code, text string) {
	if c.closing {
		return
	}
	c.closing = true
	c.reason = r
	if c.s.cfg.Protocol == Framed && !c.sentClose && code != 0 &&
		!(r == ReasonShutdown && c.s.cfg.SilentShutdown) {
		c.sentClose = true
		l := c.own()
		l.out = frame.AppendClose(l.out, code, text)
	}
	if c.l.inEvent != c {
		c.l.flushOwner()
		if !c.closed {
			_ = c.l.el.Close(c.gc)
		}
	}
}

// own makes c the owner of its loop's output buffer, writing out first what
// the buffer holds for another connection (a handler may Send to several
// connections of its loop in one event), and returns the loop.
func (c *Conn) own() *loop {
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
	if c.out != nil {
		c.out.written += uint64(len(l.out))
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
// write and, with look set, whenever c.out's timer fires while output is
// queued (the first write that leaves output queued allocates c.out). It
// closes c with ReasonWriteStall when the output has made no progress for
// the write-stall timeout, and with ReasonOutputLimit when it has stayed
// above OutputSoft for OutputSoftFor; otherwise, while output is queued, it
// arms c.out's timer to look again.
//
// Progress is a queued byte leaving for the socket or, when looking (one
// getsockopt, on Linux), the peer acknowledging bytes: the kernel's send
// buffer, megabytes on a fast link, takes new bytes only when much of it is
// free, so a peer reading slowly may drain nothing from the queue for a
// long time while it reads steadily. Progress is seen only when looked for,
// so a close comes at least the timeout after the last progress (never
// early) and at most a quarter of it later.
func (c *Conn) watchOutput(now time.Duration, look bool) {
	s := c.s
	stall, softFor := s.stallTimeout, s.lim.outputSoftFor
	if stall <= 0 && softFor <= 0 {
		return
	}
	queued := c.gc.OutboundBuffered()
	o := c.out
	if queued == 0 {
		if o != nil && o.backlog {
			o.backlog, o.aboveSoft = false, false
			o.timer.Stop()
		}
		return
	}
	if o == nil {
		// Output stays queued for the first time: watch it from here,
		// counting what is queued as written.
		o = &outWatch{written: uint64(queued)}
		o.timer.Init(s.wheel, func() { c.post(evOutput) })
		c.out = o
	}
	drained := o.written - uint64(queued)
	if !o.backlog || drained != o.drained {
		o.backlog, o.drained, o.progressAt = true, drained, now
	}
	if look && stall > 0 {
		if acked, ok := bytesAcked(c.gc.Fd()); ok && acked != o.acked {
			o.acked, o.progressAt = acked, now
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
	if look && stall > 0 && now-o.progressAt >= stall {
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

// isIdle reports whether c can be closed by a graceful shutdown without
// losing anything: no frame half received, nothing unacknowledged or queued.
func (c *Conn) isIdle() bool {
	return !c.inFrame && (c.f == nil || c.f.unacked.len() == 0) && c.gc.OutboundBuffered() == 0
}

// handleEvents runs the expiries handed over by the wheel, on the loop.
func (c *Conn) handleEvents(ev uint32) {
	s := c.s
	if ev&evClose != 0 {
		if due, ok := c.idle.Due(); ok {
			s.m.late.Observe((s.wheel.Now() - due).Seconds())
		}
		c.closeWith(Reason(c.hookReason.Load()))
		return
	}
	if ev&evOutput != 0 {
		if c.watchOutput(c.l.clock(), true); c.closing {
			return
		}
	}
	if ev&evDrain != 0 && s.cfg.Protocol == Framed && !c.sentClose {
		// Max age reached: tell the peer now; the close follows after the grace.
		c.sentClose = true
		l := c.own()
		l.out = frame.AppendClose(l.out, frame.CodeMaxAge, "max_age: closing after grace period")
	}
	if ev&evProbe != 0 {
		s.probes.Add(1)
		if s.cfg.Protocol == Framed {
			c.f.nonce++
			l := c.own()
			l.out = frame.AppendPing(l.out, c.f.nonce)
		} else if p, ok := s.h.(Prober); ok {
			p.OnProbe(c)
		}
	}
	if ev&evRetransmit != 0 && c.f != nil && c.f.unacked.len() > 0 {
		// RFC 6298 5.4: resend the earliest unacknowledged message.
		l := c.own()
		l.out = frame.AppendData(l.out, c.f.ackedTo+1, c.f.unacked.front())
		s.retransmits.Add(1)
		s.m.rto.Observe(c.f.rtx.Stats().RTO.Seconds())
	}
	c.l.flushOwner()
}

// allowPing reports whether a PING arriving at now is within the peer's
// rate (Limits.PingsPerSecond): a second's worth at once, then one per
// interval. It keeps one time, the theoretical arrival time of the generic
// cell rate algorithm: each PING moves it an interval on from the later of
// itself and now, and a PING that would take it more than a second past now
// is one too many. O(1), on the loop.
func (c *Conn) allowPing(now time.Duration) bool {
	interval := c.s.lim.pingInterval
	if interval == 0 {
		return true
	}
	tat := max(c.f.pingTAT, now) + interval
	if tat-now > time.Second {
		return false
	}
	c.f.pingTAT = tat
	return true
}
