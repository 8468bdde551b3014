package attack

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/pacer"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// This file holds the hostile peers: connections that misbehave on
// purpose, to see what the server does with them. Each records when its
// misbehaviour started (ConnResult.Misbehaved) and, if the server closed
// it, when that was seen and how (ClosedAt, End); the caller judges.

// Bounds of the hostile scenarios.
const (
	// DefaultHostileBytes is what a nonreader or ping flooder sends at
	// most (Config.HostileBytes 0).
	DefaultHostileBytes = 64 << 20
	// HostileDrain is how long a hostile connection reads what is left at
	// the end of its window, to see the server's CLOSE or EOF: a close may
	// first be seen that much after the window.
	HostileDrain = 300 * time.Millisecond
	// nonreaderRcvBuf is the receive buffer asked for (before connecting)
	// by the connections that never read, so that the server's output
	// backs up after a few KiB rather than after the kernel's megabytes.
	nonreaderRcvBuf = 4096
	floodChunk      = 64 << 10               // bytes per write of a flood
	floodWriteWait  = 200 * time.Millisecond // a flood write blocked this long is retried (the server stopped reading)
	floodTrickle    = 50 * time.Millisecond  // after the flood: a small write this often, to notice a close
	garbageBytes    = 1024
)

// stopped reports whether ch is closed; a nil ch never is.
func stopped(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// writeErrKind names the end a failed write shows: reset (the server
// closed and the kernel answered with a reset, or the pipe is broken) or
// write_error.
func writeErrKind(err error) string {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return "reset"
	}
	return "write_error"
}

// flood writes chunks of at least floodChunk bytes of messages (add
// appends message *n, counted from 1) as fast as the server takes them
// until the server closes, HostileBytes are sent, Stop is closed or the
// sending window ends; then, until the window ends, one message every
// floodTrickle, which shows a close soon after it happens. A write the
// server does not take in floodWriteWait is carried on with. A failed
// write (the server closed) sets res.ClosedAt and res.End.
func (r *run) flood(ctx context.Context, cl *client, n *uint64, add func(b []byte, n uint64) []byte, res *report.ConnResult) {
	var buf []byte
	next := func(chunk int) []byte {
		buf = buf[:0]
		for len(buf) < chunk {
			*n++
			buf = add(buf, *n)
		}
		return buf
	}
	end := r.start.Add(r.cfg.Duration)
	res.Misbehaved = time.Now()
	var pending []byte
	for now := res.Misbehaved; now.Before(end) && ctx.Err() == nil; now = time.Now() {
		slow := res.Bytes >= uint64(r.cfg.HostileBytes) || stopped(r.cfg.Stop)
		if len(pending) == 0 {
			if slow {
				pending = next(1)
			} else {
				pending = next(floodChunk)
			}
		}
		_ = cl.c.SetWriteDeadline(now.Add(floodWriteWait))
		n, err := cl.c.Write(pending)
		pending = pending[n:]
		res.Bytes += uint64(n)
		res.Writes++
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			if errors.Is(err, net.ErrClosed) {
				// The reader ended first and closed the socket: its
				// account is the better one, and says whether it was
				// the server's close.
				<-cl.done
				res.End = cl.end
				if cl.closedByServer() {
					res.ClosedAt = cl.endAt
				}
			} else {
				res.ClosedAt, res.End = time.Now(), writeErrKind(err)
			}
			break
		}
		if slow && !wait(ctx, cl, time.Now().Add(floodTrickle)) {
			break
		}
	}
	_ = cl.c.SetWriteDeadline(time.Time{})
}

// hostileEnd reads what is left on a hostile connection for at most drain
// (starting the reader unless reading), to see the server's CLOSE frame or
// EOF, then closes it and records how it ended: the CLOSE code if one
// came, else what a failed write saw (already in res), else the reader's
// eof or reset, or client if the server kept it open.
func (r *run) hostileEnd(cl *client, reading bool, drain time.Duration, res *report.ConnResult) {
	if !reading {
		go cl.read()
	}
	tm := time.NewTimer(drain)
	select {
	case <-cl.done:
	case <-tm.C:
	}
	tm.Stop()
	cl.shut()
	switch {
	case cl.closeCode != 0:
		res.End = cl.end
		if res.ClosedAt.IsZero() {
			res.ClosedAt = cl.endAt
		}
	case res.End != "":
	default:
		res.End = cl.end
		if cl.closedByServer() {
			res.ClosedAt = cl.endAt
		}
	}
}

// nonreader floods echo traffic and never reads.
func (r *run) nonreader(ctx context.Context, cl *client, res *report.ConnResult) {
	var seq uint64
	r.flood(ctx, cl, &seq, r.message, res)
	res.Sent = seq
	r.ctr.Sent.Add(int64(seq))
	r.hostileEnd(cl, false, HostileDrain, res)
}

// pingflood floods PING frames; connections of the reading role read the
// PONGs, the others never read.
func (r *run) pingflood(ctx context.Context, cl *client, role string, res *report.ConnResult) {
	reading := role == scenario.RoleReading
	if reading {
		go cl.read()
	}
	var nonce uint64
	r.flood(ctx, cl, &nonce, frame.AppendPing, res)
	r.hostileEnd(cl, reading, HostileDrain, res)
	res.Sent, res.Recv = nonce, uint64(cl.pongs.Load())
}

// splitter sends polite echo traffic, paced at Rate, with every write cut
// at random byte boundaries (its ACKs and PONGs too, which the frame.Conn
// writes through the same cutting wire), and checks every echo byte for
// byte. Latency runs from each message's scheduled instant, as for echo,
// so a message held back to be joined with the next counts the wait.
func (r *run) splitter(ctx context.Context, cl *client, i, n int, rec *recorder, res *report.ConnResult) {
	res.Survivor = true // polite, however cut: the server must keep it
	seed := rand.Uint64()
	size := r.cfg.Size
	if tc, ok := cl.w.Conn.(interface{ SetNoDelay(bool) error }); ok {
		_ = tc.SetNoDelay(true) // every piece its own segment
	}
	cut := &cutter{rng: rand.New(rand.NewPCG(seed, uint64(i)))}
	cl.w.cut = cut // before any write
	rng := rand.New(rand.NewPCG(seed, uint64(i)+1<<32))
	cl.replies(frame.ReplyAll)

	// Checkers: the reader's until it is done.
	var checked, mismatched func() uint64
	if r.cfg.Proto == Framed {
		dc := newDataCheck(seed, size)
		cl.onData = func(seq uint64, p []byte, _ time.Time) bool { return !dc.data(seq, p) }
		checked = dc.Checked
		mismatched = func() uint64 { return dc.Mismatched }
	} else {
		sc := newStreamCheck(seed, size)
		cl.onRaw = sc.feed
		checked = sc.Checked
		mismatched = func() uint64 { return sc.Mismatched }
	}
	p, _ := pacer.New(time.Now(), pacer.Phase(i, n, r.cfg.Rate), r.cfg.Rate)
	e := newEchoes(rec, 64, func(k uint64, at time.Time) int64 { return int64(at.Sub(p.At(k - 1))) })
	cl.onEcho = e.onEcho
	go cl.read()

	res.Misbehaved = time.Now()
	total := p.Count(time.Until(r.start.Add(r.cfg.Duration)))
	var sent uint64
	var batch [][]byte
	var err error
	for sent < total && err == nil {
		j := min(uint64(joined(rng)), total-sent)
		if !wait(ctx, cl, p.At(sent+j-1)) {
			break
		}
		batch = batch[:0]
		for k := sent + 1; k <= sent+j; k++ {
			batch = append(batch, payload(seed, k, size))
		}
		var n int
		n, err = cl.sendAll(batch) // a failed write may have sent part of the batch
		sent += uint64(n)
		r.ctr.Sent.Add(int64(n))
	}
	if err != nil {
		res.Err = "write"
	}
	// The reader still acknowledges the outstanding echoes.
	r.finishEchoes(ctx, cl, e, sent, checked, res)
	res.Bytes, res.Writes = cut.counts()
	res.Mismatch = mismatched()
}

// garbage sends bytes of its role and waits, reading, for the server to
// close: until the sending window ends, and at least scenario.GarbageWaitMin.
func (r *run) garbage(ctx context.Context, cl *client, role string, res *report.ConnResult) {
	b := garbage(rand.New(rand.NewPCG(rand.Uint64(), 0)), role, garbageBytes)
	cl.size, cl.expect = len(b), AnswerEcho // raw: the whole echo counts as one, whatever the server's protocol
	go cl.read()
	res.Misbehaved = time.Now()
	if _, err := cl.c.Write(b); err != nil { // to the socket: the frame.Conn sends only frames
		res.ClosedAt, res.End = time.Now(), writeErrKind(err)
	} else {
		res.Bytes, res.Writes = uint64(len(b)), 1
	}
	wait(ctx, cl, maxTime(r.start.Add(r.cfg.Duration), res.Misbehaved.Add(scenario.GarbageWaitMin)))
	r.hostileEnd(cl, true, 0, res)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// connflood opens Conns[scenario.Connflood] connections at once, answering pings,
// and holds each until FloodHold after the last has dialed, or until the
// server closes it. It runs alone, after the other scenarios, so that the
// server's connection limit is filled by it.
func (r *run) connflood(ctx context.Context) {
	n := r.cfg.Conns[scenario.Connflood]
	if n <= 0 {
		return
	}
	var wg sync.WaitGroup
	r.holdConns(ctx, &wg, scenario.Connflood, scenario.Connflood, n, netip.Addr{}, false, func(dialed *barrier, cl *client) {
		select {
		case <-dialed.released:
			wait(ctx, cl, dialed.at.Add(r.cfg.FloodHold))
		case <-cl.done:
		case <-ctx.Done():
		}
	})
	wg.Wait()
}

// holdConns opens n connections of scenario name in role at once, from
// client src (Config.Proxy; the zero Addr: the next client), each
// answering pings and, if send or with a handshake timeout known, sending
// a message at once (a flood is to fill the server's limits, not its
// handshake timeout to empty them), and holds each until hold, given the
// barrier every dial arrives at, returns. The connections run in wg; it
// returns the barrier.
func (r *run) holdConns(ctx context.Context, wg *sync.WaitGroup, name, role string, n int, src netip.Addr, send bool, hold func(dialed *barrier, cl *client)) *barrier {
	dialed := newBarrier(n, r.cfg.BarrierTimeout, nil)
	for range n {
		wg.Go(func() {
			res := report.ConnResult{Scenario: name, Role: role}
			cl, _ := r.open(ctx, &res, 0, src, dialed.arrive)
			if cl == nil {
				return
			}
			res.Misbehaved = res.OpenedAt
			cl.replies(frame.ReplyAll)
			go cl.read()
			if send || r.cfg.Timeouts.Handshake > 0 {
				if _, err := cl.send(r.payload, 1); err == nil {
					res.Sent = 1
					r.ctr.Sent.Add(1)
				}
			}
			hold(dialed, cl)
			r.hostileEnd(cl, true, 0, &res)
			r.emit(res)
		})
	}
	return dialed
}
