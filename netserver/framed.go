package netserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// framedState is a Framed connection's protocol state, allocated with its
// Conn (framedAlloc); a Raw connection has none. It belongs to the event loop,
// except rtx, which keeps its own rules.
type framedState struct {
	rtx      retransmit.Tracker // numbers our DATA (Next) and times it
	unacked  unackedQueue       // payloads of DATA sent and not acknowledged: those before rtx.Next()
	recvNext uint64             // next DATA sequence number expected from the peer
	pingTAT  time.Duration      // when the peer's PINGs would be back within their rate (allowPing)
	awayEnd  time.Duration      // when the grace of the GOAWAY sent last ends (Conn.goAway)
	nonce    uint32             // of the last keepalive PING sent
	toldAway bool               // a GOAWAY was sent
	readAway bool               // the PING sent after a GOAWAY was answered: the peer has read it
	peerAway bool               // the peer's GOAWAY arrived: it sends no new DATA
}

// awayNonce is the nonce of the PING sent right after a GOAWAY, whose
// PONG shows that the peer has read the GOAWAY. Keepalive PINGs count
// from 1 (framedState.nonce) and never reach it.
const awayNonce = 1<<64 - 1

// framedAlloc puts a Framed connection's Conn and protocol state in one
// allocation.
type framedAlloc struct {
	Conn
	framedState
}

// framedProtocol is the Framed protocol of docs/protocol.md: DATA frames
// numbered, acknowledged and retransmitted, PING and PONG, and a CLOSE
// frame with a code before the server closes. Its state is c.framed.
type framedProtocol struct{}

// newConn allocates the Conn and its protocol state together.
func (framedProtocol) newConn() *Conn {
	fc := &framedAlloc{framedState: framedState{recvNext: 1}}
	c := &fc.Conn
	c.framed = &fc.framedState
	return c
}

// refusal is a CLOSE frame with r's code.
func (framedProtocol) refusal(r Reason) []byte {
	return frame.AppendClose(nil, closeCode(r), r.String())
}

// warnsOfAge is true: a GOAWAY tells the peer, and a grace leaves it time
// to finish.
func (framedProtocol) warnsOfAge() bool { return true }

// open sets up c's retransmission tracker.
func (framedProtocol) open(c *Conn) error {
	s := c.s
	return c.framed.rtx.Init(s.wheel, s.cfg.Retransmit, retransmit.Hooks{
		Retransmit: func(uint64, int) { c.post(evRetransmit) },
		GiveUp:     func(error) { c.postClose(ReasonGiveUp) },
		Sample:     func(rtt time.Duration) { s.metrics.rtt.Observe(rtt.Seconds()) },
	})
}

func (framedProtocol) read(c *Conn) { c.onFramed() }

// send queues msg as a DATA frame, kept until the peer acknowledges it.
func (framedProtocol) send(c *Conn, msg []byte) error {
	l := c.claimOutput()
	s := c.s
	if c.framed.unacked.bytes()+len(msg) > s.lim.unackedBytes {
		return fmt.Errorf("%w: %d bytes unacknowledged, limit %d", ErrUnackedLimit, c.framed.unacked.bytes(), s.lim.unackedBytes)
	}
	if queued := c.gc.OutboundBuffered() + len(l.out) + frame.DataHeaderSize + len(msg); queued > s.lim.outputHard {
		return c.noRoom(queued)
	}
	seq := c.framed.rtx.Next()
	if err := c.framed.rtx.Sent(seq, l.clock()); err != nil {
		return fmt.Errorf("%w: %w", ErrUnackedLimit, err)
	}
	c.framed.unacked.push(msg)
	l.out = frame.AppendData(l.out, seq, msg)
	return nil
}

// sayClose queues a CLOSE frame.
func (framedProtocol) sayClose(c *Conn, code frame.Code, text string) {
	c.sentClose = true
	l := c.claimOutput()
	l.out = frame.AppendClose(l.out, code, text)
}

// goAway queues a GOAWAY with r's code, the last DATA sent and grace, and
// a PING after it, whose PONG (awayNonce) shows that the peer has read it.
func (framedProtocol) goAway(c *Conn, r Reason, grace time.Duration) {
	l := c.claimOutput()
	c.framed.toldAway = true
	l.out = frame.AppendGoAway(l.out, closeCode(r), c.framed.rtx.Next()-1, grace, r.String()+": finish what is in flight")
	l.out = frame.AppendPing(l.out, awayNonce)
}

// finished reports whether c, going away, may take its final CLOSE now
// (docs/protocol.md, "Going away"): nothing is unfinished (isIdle), and
// either no GOAWAY was sent (a silent shutdown), or the peer's GOAWAY has
// arrived, so its input is complete, or, in a shutdown, the peer has read
// the GOAWAY (it answered the PING after it) without answering it.
func (framedProtocol) finished(c *Conn) bool {
	if !c.isIdle() {
		return false
	}
	return !c.framed.toldAway || c.framed.peerAway || (c.away == ReasonShutdown && c.framed.readAway)
}

// probe sends a PING with a new nonce.
func (framedProtocol) probe(c *Conn) {
	c.framed.nonce++
	l := c.claimOutput()
	l.out = frame.AppendPing(l.out, uint64(c.framed.nonce))
}

// retransmit resends the earliest unacknowledged DATA frame (RFC 6298 5.4).
func (framedProtocol) retransmit(c *Conn) {
	if c.framed.unacked.len() == 0 {
		return
	}
	l := c.claimOutput()
	l.out = frame.AppendData(l.out, c.framed.rtx.Next()-uint64(c.framed.unacked.len()), c.framed.unacked.front())
	c.s.retransmits.Add(1)
	c.s.metrics.rto.Observe(c.framed.rtx.Stats().RTO.Seconds())
}

func (framedProtocol) unacked(c *Conn) (bytes, msgs int) {
	return c.framed.unacked.bytes(), c.framed.unacked.len()
}

// release stops the retransmission tracker and lets the kept payloads go.
func (framedProtocol) release(c *Conn) {
	c.framed.rtx.Stop()
	c.framed.unacked.reset(true)
}

// onFramed parses c's inbound frames.
func (c *Conn) onFramed() {
	now := c.l.clock()
	c.timeouts.BytesInAt(now)
	if c.gc.InboundBuffered() < int(c.need) {
		return // the frame under way is still short: do not look at it again
	}
	buf, _ := c.gc.Peek(-1)
	c.l.peeks.Add(1)
	used := c.parseFrames(buf, now)
	if c.closing {
		_, _ = c.gc.Discard(-1)
		return
	}
	if used > 0 {
		// Never Discard(0): gnet's Discard(n <= 0) empties the whole buffer.
		_, _ = c.gc.Discard(used)
	}
}

// parseFrames acts on every whole frame at the start of buf and reports how
// many bytes they took. It leaves c.need at what the next frame needs in
// all, and starts the frame deadline if part of one is there.
func (c *Conn) parseFrames(buf []byte, now time.Duration) (used int) {
	s := c.s
	needAck := false
	for !c.closing {
		rest := buf[used:]
		f, n, err := frame.Parse(rest, s.maxFrame)
		if errors.Is(err, frame.ErrShort) {
			// Until a frame's length is known, any byte is worth a look:
			// its first byte starts the frame deadline.
			c.need = int32(len(rest) + 1) // below LenSize+1
			if len(rest) >= frame.LenSize {
				c.need = frame.LenSize + int32(binary.BigEndian.Uint32(rest)) // ErrShort: at most MaxFrame, 1 GiB
			}
			if len(rest) > 0 && !c.inFrame {
				c.inFrame = true
				c.timeouts.FrameStartAt(now)
			}
			break
		}
		if err != nil {
			if errors.Is(err, frame.ErrTooLarge) {
				c.closeWith(ReasonTooLarge)
			} else {
				c.closeWith(ReasonProtocol)
			}
			break
		}
		used += n
		c.need = 0
		if c.inFrame {
			c.inFrame = false
			c.timeouts.FrameEnd()
		}
		if !c.handshook {
			c.handshook = true
			c.timeouts.HandshakeDone()
		}
		switch f.Type {
		case frame.TypeData:
			switch {
			case c.framed.peerAway && f.Seq >= c.framed.recvNext:
				c.closeWith(ReasonProtocol) // new DATA after the peer's GOAWAY
			case f.Seq == c.framed.recvNext:
				c.framed.recvNext++
				c.timeouts.ActivityAt(now)
				needAck = true
				s.messages.OnMessage(c, f.Payload)
			case f.Seq < c.framed.recvNext:
				needAck = true // a retransmission: acknowledge again, deliver once
			default:
				c.closeWith(ReasonProtocol)
			}
		case frame.TypeAck:
			switch first := c.framed.rtx.Next() - uint64(c.framed.unacked.len()); {
			case f.Seq >= c.framed.rtx.Next():
				c.closeWith(ReasonProtocol)
			case f.Seq >= first:
				c.framed.rtx.AckedThrough(f.Seq, now)
				c.framed.unacked.pop(int(f.Seq - first + 1))
			}
		case frame.TypePing:
			if !c.allowPing(now) {
				c.closeWith(ReasonPingFlood)
				break
			}
			l := c.claimOutput()
			l.out = frame.AppendPong(l.out, f.Nonce)
		case frame.TypePong:
			if f.Nonce == awayNonce {
				c.framed.readAway = true
			}
		case frame.TypeGoAway:
			// The peer sends no new DATA from here; its last must be the
			// last that arrived, as TCP keeps order.
			if f.Seq != c.framed.recvNext-1 {
				c.closeWith(ReasonProtocol)
				break
			}
			c.framed.peerAway = true
		case frame.TypeClose:
			c.sentClose = true // the peer is going: no need to tell it
			c.closeWith(ReasonPeerClosed)
		}
	}
	if needAck && !c.closing {
		l := c.claimOutput()
		l.out = frame.AppendAck(l.out, c.framed.recvNext-1)
	}
	return used
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
	tat := max(c.framed.pingTAT, now) + interval
	if tat-now > time.Second {
		return false
	}
	c.framed.pingTAT = tat
	return true
}
