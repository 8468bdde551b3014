package frame

import (
	"errors"
	"fmt"
	"time"
)

// Recv returns the next new DATA payload from the peer, in order, each once
// (a retransmission is skipped), and a *CloseError when the peer sends
// CLOSE; it skips the other frames, which the Conn has handled already (see
// Next), GOAWAY included: after one, Recv goes on returning the DATA that
// still arrives until the final CLOSE. The payload is valid until the next
// Recv or Next. One reading goroutine at a time.
func (c *Conn) Recv() ([]byte, error) {
	for {
		f, err := c.Next()
		if err != nil {
			return nil, err
		}
		switch {
		case f.Type == TypeData && !c.retx:
			return f.Payload, nil
		case f.Type == TypeClose:
			return nil, &CloseError{Code: f.Code, Reason: string(f.Reason)}
		}
	}
}

// Next returns the next frame from the peer, whatever its type, reading
// the connection when no whole frame is buffered. By then the Conn has
// done its part for it when the read brought it (see SetReplies): DATA
// acknowledged, PING answered, ACK recorded (Acked). DATA comes in order; a
// retransmission (a sequence number Next returned before) is returned
// again, and a DATA that skips one is an error wrapping ErrMalformed, as is
// a GOAWAY whose last DATA is not the last that arrived. A GOAWAY is
// answered (see Conn) and the replies go on; after the peer's CLOSE, which
// is final, the Conn writes no more replies (not even those owed for the
// frames before it in the same read: the peer reads nothing more, and a
// write would only draw a reset), and Next goes on reading (the peer
// closes next: io.EOF). A malformed frame is an error from then on; a read
// error is returned as it is (io.EOF, net.ErrClosed after Close, a
// deadline), once the frames read before it are taken. The frame's Payload
// and Reason are valid until the next Next or Recv.
//
// One reading goroutine at a time. It does not allocate once its buffers
// have grown to the largest frame and the largest reply; it reads the
// clock once per read (ReadTime), and writes at most once per read (the
// replies owed, in one write; a failed reply write is not returned here,
// but by the next Send, since the read side then tells how the connection
// ended).
func (c *Conn) Next() (Frame, error) {
	for {
		if c.perr != nil {
			return Frame{}, c.perr
		}
		before := c.dec.Buffered()
		f, ok, err := c.dec.Next()
		if err != nil {
			return Frame{}, err
		}
		if ok {
			c.scanned = max(c.scanned-(before-c.dec.Buffered()), 0)
			if f.Type == TypeData {
				switch {
				case f.Seq == c.delivered+1:
					c.delivered, c.retx = f.Seq, false
				case f.Seq <= c.delivered:
					c.retx = true
				default:
					c.perr = fmt.Errorf("frame: DATA %d after %d: %w", f.Seq, c.delivered, ErrMalformed)
					return Frame{}, c.perr
				}
			}
			if f.Type == TypeGoAway && f.Seq != c.delivered {
				c.perr = fmt.Errorf("frame: GOAWAY says its last DATA is %d, %d arrived: %w", f.Seq, c.delivered, ErrMalformed)
				return Frame{}, c.perr
			}
			return f, nil
		}
		if err := c.rerr; err != nil {
			c.rerr = nil
			return Frame{}, err
		}
		n, err := c.nc.Read(c.buf)
		c.readAt = time.Now()
		if n > 0 {
			c.dec.Feed(c.buf[:n])
			c.scan()
		}
		if err != nil {
			if n == 0 {
				return Frame{}, err
			}
			c.rerr = err
		}
	}
}

// ReadTime returns when the read that completed the frame Next (or Recv)
// returned last came back: the frame's arrival, as far as this process can
// tell, for measuring round trips. The reading goroutine; O(1).
func (c *Conn) ReadTime() time.Time { return c.readAt }

// scan does the protocol's work for the whole frames a read has just
// completed, before Next hands them out: it records ACKs and GOAWAYs and
// writes, in one write, the PONGs, the cumulative ACK and the answer to a
// GOAWAY the frames call for.
func (c *Conn) scan() {
	if c.scanStop {
		return
	}
	in := c.dec.buf[c.dec.off:]
	want := Reply(c.replies.Load())
	data := false
	var away Frame // the read's last GOAWAY, if seen
	seen := false
	c.reply = c.reply[:0]
scan:
	for c.scanned < len(in) {
		f, n, err := Parse(in[c.scanned:], c.dec.max)
		if err != nil {
			if !errors.Is(err, ErrShort) {
				c.scanStop = true // Next reports it
			}
			break
		}
		switch f.Type {
		case TypeData:
			if f.Seq > c.arrived+1 {
				c.scanStop = true // a gap: Next reports it
				break scan
			}
			if f.Seq == c.arrived+1 {
				c.arrived++
			}
			data = true // a retransmission is acknowledged again
		case TypeAck:
			for a := c.acked.Load(); f.Seq > a && !c.acked.CompareAndSwap(a, f.Seq); a = c.acked.Load() {
			}
		case TypePing:
			if want&ReplyPong != 0 {
				c.reply = AppendPong(c.reply, f.Nonce)
			}
		case TypeGoAway:
			if f.Seq != c.arrived {
				c.scanStop = true // Next reports it
				break scan
			}
			away, seen = f, true
		case TypeClose:
			// The final CLOSE: the peer closes next, and a write now would
			// only draw a reset.
			c.scanStop = true
			c.reply = c.reply[:0]
			c.endScan(away, seen, false, true)
			return
		}
		c.scanned += n
	}
	if data && want&ReplyAck != 0 {
		c.reply = AppendAck(c.reply, c.arrived)
	}
	c.endScan(away, seen, want&ReplyGoAway != 0, false)
}

// endScan ends a scan under wmu, so after any DATA being written: it
// records the read's last GOAWAY, if seen, and, if answer, answers the
// first read that brings one with the Conn's own GOAWAY (the latest's
// code, its last DATA) and refuses new DATA from then on; it records the
// peer's final CLOSE, if final; and it writes the replies in c.reply, if
// any, in one write.
func (c *Conn) endScan(away Frame, seen, answer, final bool) {
	if !seen && !final && len(c.reply) == 0 {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.peerDone = c.peerDone || final
	if seen {
		c.away = GoAway{Code: away.Code, Grace: away.Grace, Reason: string(away.Reason), At: c.readAt}
		c.awayOK = true
		if answer && !c.answered {
			c.answered, c.refuse = true, true
			c.reply = AppendGoAway(c.reply, away.Code, c.sendNext-1, 0, "")
		}
	}
	if len(c.reply) > 0 {
		_ = c.writeLocked(c.reply) // kept for the next Send; the read side tells how it ended
	}
}
