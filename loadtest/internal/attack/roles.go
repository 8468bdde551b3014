package attack

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/pacer"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// This file holds the polite scenarios' roles: what each connection does
// once open (conn in attack.go runs the role its scenario gives it).

func (r *run) echo(ctx context.Context, cl *client, i, n int, rec *recorder, res *report.ConnResult) {
	cl.replies(frame.ReplyAll)
	var p pacer.Pacer
	var sentAt atomic.Int64 // closed loop: send time of the outstanding message
	// latency of echo k arriving at at: closed loop, from the send of the
	// one outstanding message; open loop, from the message's scheduled
	// instant (the schedule starts when this connection is open, so the dial
	// ramp is not counted as latency; every connection stops at the same end).
	latency := func(_ uint64, at time.Time) int64 { return at.UnixNano() - sentAt.Load() }
	if !r.cfg.Closed {
		p, _ = pacer.New(time.Now(), pacer.Phase(i, n, r.cfg.Rate), r.cfg.Rate)
		latency = func(k uint64, at time.Time) int64 { return int64(at.Sub(p.At(k - 1))) }
	}
	e := newEchoes(rec, 256, latency)
	cl.onEcho = e.onEcho
	go cl.read()
	end := r.start.Add(r.cfg.Duration)
	var sent uint64
	if r.cfg.Closed {
		for time.Now().Before(end) {
			sentAt.Store(time.Now().UnixNano())
			if _, err := cl.send(r.payload, 1); err != nil {
				res.Err = writeErr(err)
				break
			}
			sent++
			r.ctr.Sent.Add(1)
			select {
			case <-e.got:
			case <-cl.done:
			case <-ctx.Done():
			case <-time.After(r.cfg.AnswerWait):
			}
			if e.recv.Load() < sent {
				break
			}
		}
	} else {
		total := p.Count(time.Until(end))
		for sent < total {
			if !wait(ctx, cl, p.At(sent)) {
				break
			}
			if testPauseSender != nil {
				testPauseSender(sent)
			}
			due := min(p.Due(time.Since(p.At(0))+p.Offset(0)), total)
			n, err := cl.send(r.payload, int(due-sent)) // the ones due, in one write
			// A failed write may have sent part of the batch (a large one
			// after the client was paused, say): what went out counts.
			r.ctr.Sent.Add(int64(n))
			sent += uint64(n)
			if err != nil {
				res.Err = writeErr(err)
				break
			}
		}
	}
	r.finishEchoes(ctx, cl, e, sent, func() uint64 { return e.recv.Load() }, res)
}

// finishEchoes waits up to AnswerWait for the outstanding echoes, shuts
// the connection and records what was sent, answered (recv, read once
// the reader is done) and lost.
func (r *run) finishEchoes(ctx context.Context, cl *client, e *echoes, sent uint64, recv func() uint64, res *report.ConnResult) {
	for drainEnd := time.Now().Add(r.cfg.AnswerWait); e.recv.Load() < sent && time.Now().Before(drainEnd); {
		select {
		case <-e.got:
		case <-cl.done:
			drainEnd = time.Now()
		case <-ctx.Done():
			drainEnd = time.Now()
		case <-time.After(10 * time.Millisecond):
		}
	}
	if cl.closedByServerYet() && res.Err == "" {
		res.Err = "closed_by_server"
	}
	cl.shut()
	e.flush()
	res.Sent, res.Recv = sent, recv()
	if res.Err == "write" && res.Recv > res.Sent {
		// Framed, a failed batch's frames that went out are not known
		// (sendAll): those echoed were evidently sent.
		r.ctr.Sent.Add(int64(res.Recv - res.Sent))
		res.Sent = res.Recv
	}
	if res.Recv < res.Sent {
		res.Lost = res.Sent - res.Recv
		r.ctr.Errors.Add(int64(res.Lost))
	}
}

// once sends one message and waits for its echo; it returns the send time.
func (r *run) once(ctx context.Context, cl *client, res *report.ConnResult) (time.Time, bool) {
	got := startForOnce(cl)
	return r.sendOnce(ctx, cl, got, res)
}

// startForOnce starts cl's reader for sendOnce; the returned channel
// receives when the echo of message cl.answerFrom (or a later one) arrives.
func startForOnce(cl *client) chan struct{} {
	got := make(chan struct{}, 1)
	cl.onEcho = func(k uint64, _ time.Time) {
		if k < max(cl.answerFrom.Load(), 1) {
			return // a keep-alive's echo (see quietStart)
		}
		select {
		case got <- struct{}{}:
		default:
		}
	}
	go cl.read()
	return got
}

// sendOnce sends message 1 (after the connection's keep-alives, if any) on
// a connection started by startForOnce and waits for its echo; it returns
// the send time.
func (r *run) sendOnce(ctx context.Context, cl *client, got chan struct{}, res *report.ConnResult) (time.Time, bool) {
	cl.answerFrom.Store(uint64(cl.keepalives) + 1)
	t := time.Now()
	if _, err := cl.send(r.payload, 1); err != nil {
		res.Err = "write"
		return t, false
	}
	res.Sent = 1
	r.ctr.Sent.Add(1)
	if cl.proto == Raw && cl.expect == AnswerNone {
		return t, true // nothing comes back: written is delivered
	}
	select {
	case <-got:
		res.Recv = 1
		return t, true
	case <-cl.done:
	case <-ctx.Done():
	case <-time.After(r.cfg.AnswerWait):
	}
	res.Err, res.Lost = "no_echo", 1
	r.ctr.Errors.Add(1)
	return t, false
}

// expectClose waits for the server to close the connection, until
// expected + CloseHorizon, and records the expectation.
func (r *run) expectClose(ctx context.Context, cl *client, res *report.ConnResult, reason string, expected time.Time) {
	res.Expect, res.ExpectedAt = reason, expected
	wait(ctx, cl, expected.Add(r.cfg.CloseHorizon))
}

// quietStart starts a quiet connection's reader, answering pings until its
// send, and waits until turn is closed (its turn in the spread window),
// sending a keep-alive every third of the idle timeout (at most
// keepAliveMax; cl.keepalives counts them), so that the wait for the
// slowest dials cannot outlast the server's idle timer, which runs from
// the open. It reports false (res.Err set if the server closed it) if the
// connection ended first.
func (r *run) quietStart(ctx context.Context, cl *client, turn <-chan struct{}, res *report.ConnResult) (chan struct{}, bool) {
	cl.replies(frame.ReplyAll)          // the server may probe while we wait; we are alive until the send
	cl.answerFrom.Store(math.MaxUint64) // nothing answers the last message before it is sent
	got := startForOnce(cl)
	var keep <-chan time.Time
	if every := min(r.cfg.Timeouts.Idle/3, keepAliveMax); every > 0 {
		tk := time.NewTicker(every)
		defer tk.Stop()
		keep = tk.C
	}
	keepAlive := func() error {
		if _, err := cl.send(r.payload, 1); err != nil {
			select {
			case <-cl.done: // the server closed it: quietEnded says so
			case <-time.After(100 * time.Millisecond):
				if !isDone(cl) {
					res.Err = "write"
					r.ctr.Errors.Add(1)
				}
			}
			return err
		}
		cl.keepalives++
		r.ctr.Sent.Add(1)
		return nil
	}
	// A server with a handshake timeout closes a connection that has not
	// sent its first bytes by then: with one known, the first keep-alive
	// goes at once.
	if r.cfg.Timeouts.Handshake > 0 && keepAlive() != nil {
		return r.quietEnded(cl, res)
	}
	if !keepUntil(ctx, cl, turn, keep, keepAlive) {
		return r.quietEnded(cl, res)
	}
	return got, true
}

// keepAliveMax bounds the interval of a quiet connection's keep-alives, so
// that a server's shorter timeouts the harness does not know of (a
// handshake timeout, say) do not close it while it waits.
const keepAliveMax = 5 * time.Second

// keepUntil waits until until delivers, calling keepAlive at every tick of
// keep (nil: never). It reports false if the connection or ctx ended first,
// or a keep-alive could not be sent.
func keepUntil(ctx context.Context, cl *client, until <-chan struct{}, keep <-chan time.Time, keepAlive func() error) bool {
	for {
		select {
		case <-until:
			return !isDone(cl) && ctx.Err() == nil
		case <-cl.done:
			return false
		case <-ctx.Done():
			return false
		case <-keep:
			if keepAlive() != nil {
				return false // the reader sees how the connection ended
			}
		}
	}
}

func (r *run) quietEnded(cl *client, res *report.ConnResult) (chan struct{}, bool) {
	if isDone(cl) && res.Err == "" {
		res.Err = "closed_before_send"
		r.ctr.Errors.Add(1)
	}
	return nil, false
}

func isDone(cl *client) bool {
	select {
	case <-cl.done:
		return true
	default:
		return false
	}
}

// idle waits for every quiet connection to open, sends its one message at
// its place in the spread window and goes silent: the idle timeout must
// close it, counted from a moment between the send and the server's
// answer (framed: its ACK; raw: the echo).
func (r *run) idle(ctx context.Context, cl *client, i int, res *report.ConnResult) {
	got, ok := r.quietStart(ctx, cl, r.turns.of(scenario.Idle, i), res)
	if !ok {
		return
	}
	t, ok := r.sendOnce(ctx, cl, got, res)
	if !ok {
		return
	}
	if r.cfg.Timeouts.Idle > 0 {
		r.expectClose(ctx, cl, res, "idle", t.Add(r.cfg.Timeouts.Idle))
	}
	// Read only now: the echo that ended sendOnce may have been parsed just
	// before the ACK that came behind it in the same read. The server saw
	// the message at the latest when it answered: the window's end.
	if a := cl.answeredAt(); !a.IsZero() && res.Expect != "" {
		res.ExpectedBy = a.Add(r.cfg.Timeouts.Idle)
	}
}

// handshake sends nothing and answers nothing (a PONG is a frame, which
// would complete the handshake): the server's handshake timeout must close
// it, counted from dialed, the start of the dial.
func (r *run) handshake(ctx context.Context, cl *client, dialed time.Time, res *report.ConnResult) {
	go cl.read()
	r.expectClose(ctx, cl, res, "handshake", dialed.Add(r.cfg.Timeouts.Handshake))
}

// silent: waits at the barrier like idle, then one echo (acknowledged) on
// the spread schedule, then not a byte: keepalive must close it. Until its
// send it answers pings, so the wait does not kill it.
func (r *run) silent(ctx context.Context, cl *client, i int, res *report.ConnResult) {
	got, ok := r.quietStart(ctx, cl, r.turns.of(scenario.Keepalive, i), res)
	if !ok {
		return
	}
	cl.replies(frame.ReplyAck) // PINGs unanswered from now on
	if _, ok := r.sendOnce(ctx, cl, got, res); !ok {
		return
	}
	time.Sleep(5 * time.Millisecond) // let the reader's ACK go out; it is the last byte
	last := cl.lastWrite()
	r.expectClose(ctx, cl, res, "dead_peer", last.Add(r.cfg.Timeouts.DeadPeerAfter()))
}

// survivorWindow is how long keepalive survivors stay: the run's duration,
// but at least until the silent half must have been closed.
func (r *run) survivorWindow() time.Duration {
	t := r.cfg.Timeouts
	return max(r.cfg.Duration, t.DeadPeerAfter()+t.Slack+500*time.Millisecond)
}

// survivorEnd returns when a survivor that started at start may leave:
// the survivor window after its start, and not before the silent half,
// spread over IdleSpread after the barrier, must have been closed. ok is
// false while the barrier holds (the end is not known yet).
func (r *run) survivorEnd(start time.Time) (end time.Time, ok bool) {
	end = start.Add(r.survivorWindow())
	if r.quiet == nil {
		return end, true
	}
	select {
	case <-r.quiet.released:
	default:
		return end, false
	}
	t := r.cfg.Timeouts
	silentEnd := r.quiet.at.Add(r.cfg.IdleSpread + t.DeadPeerAfter() + t.Slack + 500*time.Millisecond)
	if silentEnd.After(end) {
		end = silentEnd
	}
	return end, true
}

// survivor answers pings and sends a message between the keepalive time and
// the idle timeout, so that it is probed but never idle.
func (r *run) survivor(ctx context.Context, cl *client, res *report.ConnResult) {
	cl.replies(frame.ReplyAll)
	res.Survivor = true
	t := r.cfg.Timeouts
	every := 2 * max(t.KeepaliveTime, 10*time.Millisecond)
	if t.Idle > 0 {
		every = (t.KeepaliveTime + t.Idle) / 2
		if every <= t.KeepaliveTime {
			every = t.Idle / 2
		}
	}
	var recv atomic.Uint64
	cl.onEcho = func(k uint64, _ time.Time) { recv.Store(k) }
	go cl.read()
	start := time.Now()
	var seq uint64
	for next := start; ; next = next.Add(every) {
		if end, ok := r.survivorEnd(start); ok && !next.Before(end) {
			break
		}
		if !wait(ctx, cl, next) {
			break
		}
		seq++
		if _, err := cl.send(r.payload, 1); err != nil {
			res.Err = "write"
			break
		}
		r.ctr.Sent.Add(1)
	}
	end, _ := r.survivorEnd(start)
	wait(ctx, cl, end)
	res.Sent, res.Recv = seq, recv.Load()
}

// retransmit never acknowledges: the server must resend its echo on the
// RFC 6298 ladder and give up.
func (r *run) retransmit(ctx context.Context, cl *client, res *report.ConnResult) {
	cl.replies(frame.ReplyPong) // DATA never acknowledged
	var arrivals []time.Time
	var mu sync.Mutex
	cl.onData = func(seq uint64, _ []byte, at time.Time) bool {
		if seq != 1 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		arrivals = append(arrivals, at)
		return len(arrivals) > 1
	}
	// Offsets run from our send of the message the server echoes: the
	// server sent its echo after that, so a retransmission or give-up seen
	// earlier than the ladder says is really early.
	sent, ok := r.once(ctx, cl, res)
	if !ok {
		return
	}
	r.expectClose(ctx, cl, res, "retransmit_give_up", sent.Add(r.giveUp))
	cl.shut()
	for _, at := range arrivals[min(1, len(arrivals)):] {
		res.Retx = append(res.Retx, at.Sub(sent))
	}
}

// slowloris starts a message (framed: a DATA frame; raw: the payload)
// and trickles it a byte at a time to the socket, never sending its last
// byte: the server's frame (request) deadline, which runs from the first
// byte's write, must close it. With a handshake timeout known, a framed
// connection first sends a PING, which completes its handshake, so that
// the frame deadline rather than the handshake's cuts the trickle.
func (r *run) slowloris(ctx context.Context, cl *client, res *report.ConnResult) {
	go cl.read()
	msg, first := r.payload, 1 // raw: the message, and the bytes written at once
	if r.cfg.Proto == Framed {
		if r.cfg.Timeouts.Handshake > 0 {
			// A PING, whose PONG needs no answer: nothing else is
			// written, so no frame of the client's cuts into the trickle.
			if _, err := cl.c.Write(frame.AppendPing(nil, 1)); err != nil {
				res.Err = "write"
				return
			}
		}
		msg, first = frame.AppendData(nil, 1, r.payload), frame.HeaderSize
	}
	if len(msg) < 2 {
		return // nothing to hold back (run.go reports it not applicable)
	}
	t0 := time.Now()
	if _, err := cl.c.Write(msg[:first]); err != nil {
		res.Err = "write"
		return
	}
	res.Expect, res.ExpectedAt = "frame_deadline", t0.Add(r.cfg.Timeouts.Frame)
	every, first1 := trickle(r.cfg.Timeouts.Frame)
	end := res.ExpectedAt.Add(r.cfg.CloseHorizon) // trickling on: a late server's idle timeout must not take it
	for i, next := first, t0.Add(first1); i < len(msg)-1 && next.Before(end); i, next = i+1, next.Add(every) {
		if !wait(ctx, cl, next) {
			return
		}
		if _, err := cl.c.Write(msg[i : i+1]); err != nil {
			break // the server closed it, most likely: the reader says how, below
		}
	}
	wait(ctx, cl, end)
}

// trickle returns the interval of a slowloris trickle against a frame
// deadline, a quarter of it, and the offset of its first byte, half that:
// the bytes fall at 1/8, 3/8, 5/8 and 7/8 of the deadline, none at the
// deadline, where it would race the server's close (and draw a reset).
func trickle(frame time.Duration) (every, first time.Duration) {
	every = max(frame/4, 10*time.Millisecond)
	return every, every / 2
}
