package netserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// framed is a Framed connection's protocol state, allocated with its Conn
// (framedConn); a Raw connection has none. It belongs to the event loop,
// except rtx, which keeps its own rules.
type framed struct {
	rtx      retransmit.Tracker
	unacked  unackedQueue  // payloads of DATA sent and not acknowledged
	recvNext uint64        // next DATA sequence number expected from the peer
	sendNext uint64        // sequence number of the next DATA we send
	ackedTo  uint64        // highest sequence number the peer acknowledged
	pingTAT  time.Duration // when the peer's PINGs would be back within their rate (allowPing)
	awayEnd  time.Duration // when the grace of the GOAWAY sent last ends (Conn.goAway)
	nonce    uint32        // of the last keepalive PING sent
	toldAway bool          // a GOAWAY was sent
	readAway bool          // the PING sent after a GOAWAY was answered: the peer has read it
	peerAway bool          // the peer's GOAWAY arrived: it sends no new DATA
}

// awayNonce is the nonce of the PING sent right after a GOAWAY, whose
// PONG shows that the peer has read the GOAWAY. Keepalive PINGs count
// from 1 (framed.nonce) and never reach it.
const awayNonce = 1<<64 - 1

// framedConn puts a Framed connection's Conn and protocol state in one
// allocation.
type framedConn struct {
	Conn
	framed
}

// framedProto is the Framed protocol of docs/protocol.md: DATA frames
// numbered, acknowledged and retransmitted, PING and PONG, and a CLOSE
// frame with a code before the server closes. Its state is c.f.
type framedProto struct{}

// newConn allocates the Conn and its protocol state together.
func (framedProto) newConn() *Conn {
	fc := &framedConn{framed: framed{recvNext: 1, sendNext: 1}}
	c := &fc.Conn
	c.f = &fc.framed
	return c
}

// refusal is a CLOSE frame with r's code.
func (framedProto) refusal(r Reason) []byte {
	return frame.AppendClose(nil, closeCode(r), r.String())
}

// warnsOfAge is true: a GOAWAY tells the peer, and a grace leaves it time
// to finish.
func (framedProto) warnsOfAge() bool { return true }

// open sets up c's retransmission tracker.
func (framedProto) open(c *Conn) error {
	s := c.s
	return c.f.rtx.Init(s.wheel, s.cfg.Retransmit, retransmit.Hooks{
		Retransmit: func(uint64, int) { c.post(evRetransmit) },
		GiveUp:     func(error) { c.postClose(ReasonGiveUp) },
		Sample:     func(rtt time.Duration) { s.m.rtt.Observe(rtt.Seconds()) },
	})
}

func (framedProto) read(c *Conn) { c.onFramed() }

// send queues msg as a DATA frame, kept until the peer acknowledges it.
func (framedProto) send(c *Conn, msg []byte) error {
	l := c.own()
	s := c.s
	if c.f.unacked.bytes()+len(msg) > s.lim.unackedBytes {
		return fmt.Errorf("%w: %d bytes unacknowledged, limit %d", ErrUnackedLimit, c.f.unacked.bytes(), s.lim.unackedBytes)
	}
	if queued := c.gc.OutboundBuffered() + len(l.out) + frame.DataHeaderSize + len(msg); queued > s.lim.outputHard {
		return c.noRoom(queued)
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

// sayClose queues a CLOSE frame.
func (framedProto) sayClose(c *Conn, code frame.Code, text string) {
	c.sentClose = true
	l := c.own()
	l.out = frame.AppendClose(l.out, code, text)
}

// goAway queues a GOAWAY with r's code, the last DATA sent and grace, and
// a PING after it, whose PONG (awayNonce) shows that the peer has read it.
func (framedProto) goAway(c *Conn, r Reason, grace time.Duration) {
	l := c.own()
	c.f.toldAway = true
	l.out = frame.AppendGoAway(l.out, closeCode(r), c.f.sendNext-1, grace, r.String()+": finish what is in flight")
	l.out = frame.AppendPing(l.out, awayNonce)
}

// finished reports whether c, going away, may take its final CLOSE now
// (docs/protocol.md, "Going away"): nothing is unfinished (isIdle), and
// either no GOAWAY was sent (a silent shutdown), or the peer's GOAWAY has
// arrived, so its input is complete, or, in a shutdown, the peer has read
// the GOAWAY (it answered the PING after it) without answering it.
func (framedProto) finished(c *Conn) bool {
	if !c.isIdle() {
		return false
	}
	return !c.f.toldAway || c.f.peerAway || (c.away == ReasonShutdown && c.f.readAway)
}

// probe sends a PING with a new nonce.
func (framedProto) probe(c *Conn) {
	c.f.nonce++
	l := c.own()
	l.out = frame.AppendPing(l.out, uint64(c.f.nonce))
}

// retransmit resends the earliest unacknowledged DATA frame (RFC 6298 5.4).
func (framedProto) retransmit(c *Conn) {
	if c.f.unacked.len() == 0 {
		return
	}
	s := c.s
	l := c.own()
	l.out = frame.AppendData(l.out, c.f.ackedTo+1, c.f.unacked.front())
	s.retransmits.Add(1)
	s.m.rto.Observe(c.f.rtx.Stats().RTO.Seconds())
}

func (framedProto) unacked(c *Conn) (bytes, msgs int) {
	return c.f.unacked.bytes(), c.f.unacked.len()
}

// release stops the retransmission tracker and lets the kept payloads go.
func (framedProto) release(c *Conn) {
	c.f.rtx.Stop()
	c.f.unacked.reset(true)
}

// onFramed parses c's inbound frames.
func (c *Conn) onFramed() {
	now := c.l.clock()
	c.idle.BytesInAt(now)
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
				c.idle.FrameStartAt(now)
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
			c.idle.FrameEnd()
		}
		if !c.handshook {
			c.handshook = true
			c.idle.HandshakeDone()
		}
		switch f.Type {
		case frame.TypeData:
			switch {
			case c.f.peerAway && f.Seq >= c.f.recvNext:
				c.closeWith(ReasonProtocol) // new DATA after the peer's GOAWAY
			case f.Seq == c.f.recvNext:
				c.f.recvNext++
				c.idle.ActivityAt(now)
				needAck = true
				s.messages.OnMessage(c, f.Payload)
			case f.Seq < c.f.recvNext:
				needAck = true // a retransmission: acknowledge again, deliver once
			default:
				c.closeWith(ReasonProtocol)
			}
		case frame.TypeAck:
			if f.Seq >= c.f.sendNext {
				c.closeWith(ReasonProtocol)
				break
			}
			if f.Seq > c.f.ackedTo {
				c.f.rtx.AckedThrough(f.Seq, now)
				c.f.unacked.pop(int(f.Seq - c.f.ackedTo))
				c.f.ackedTo = f.Seq
			}
		case frame.TypePing:
			if !c.allowPing(now) {
				c.closeWith(ReasonPingFlood)
				break
			}
			l := c.own()
			l.out = frame.AppendPong(l.out, f.Nonce)
		case frame.TypePong:
			if f.Nonce == awayNonce {
				c.f.readAway = true
			}
		case frame.TypeGoAway:
			// The peer sends no new DATA from here; its last must be the
			// last that arrived, as TCP keeps order.
			if f.Seq != c.f.recvNext-1 {
				c.closeWith(ReasonProtocol)
				break
			}
			c.f.peerAway = true
		case frame.TypeClose:
			c.sentClose = true // the peer is going: no need to tell it
			c.closeWith(ReasonPeerClosed)
		}
	}
	if needAck && !c.closing {
		l := c.own()
		l.out = frame.AppendAck(l.out, c.f.recvNext-1)
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
	tat := max(c.f.pingTAT, now) + interval
	if tat-now > time.Second {
		return false
	}
	c.f.pingTAT = tat
	return true
}
