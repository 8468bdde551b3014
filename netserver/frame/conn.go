package frame

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Conn is a small client of the framed protocol over a net.Conn. Send
// numbers and sends DATA; Recv returns the peer's DATA payloads in order,
// each once, acknowledging them and answering PINGs with PONGs as it goes.
// It keeps no copy of what it sends and does not retransmit: over TCP
// nothing is lost, and netwheel's server retransmits only to peers that
// stop acknowledging.
//
// Recv must be called from one goroutine at a time; Send, Ping and Close
// may be called from any goroutine, also while Recv runs (writes are
// serialized, so frames never interleave).
type Conn struct {
	nc  net.Conn
	dec *Decoder
	buf []byte // Recv's read buffer

	wmu      sync.Mutex // guards sendNext, out and writes to nc
	sendNext uint64
	out      []byte

	recvNext uint64        // Recv's: the next DATA sequence number expected
	acked    atomic.Uint64 // the highest sequence number the peer acknowledged
}

// CloseError is what Recv returns when the peer sent CLOSE.
type CloseError struct {
	Code   Code
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("frame: the peer closed: %s (%d): %s", e.Code, uint16(e.Code), e.Reason)
}

// Dial connects to a framed server at addr (host:port).
func Dial(ctx context.Context, addr string) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewConn(nc, 0), nil
}

// NewConn speaks the framed protocol over nc, accepting frames of length at
// most max (0 means DefaultMax).
func NewConn(nc net.Conn, max int) *Conn {
	return &Conn{nc: nc, dec: NewDecoder(max), buf: make([]byte, 16<<10), sendNext: 1, recvNext: 1}
}

// NetConn returns the underlying connection (to set deadlines, say).
func (c *Conn) NetConn() net.Conn { return c.nc }

// Send sends payload as the next DATA frame and returns its sequence
// number.
func (c *Conn) Send(payload []byte) (uint64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	seq := c.sendNext
	c.out = AppendData(c.out[:0], seq, payload)
	if _, err := c.nc.Write(c.out); err != nil {
		return 0, err
	}
	c.sendNext++
	return seq, nil
}

// Ping sends a PING; the peer's PONG is taken by Recv.
func (c *Conn) Ping(nonce uint64) error {
	return c.write(func(b []byte) []byte { return AppendPing(b, nonce) })
}

// Acked reports the highest sequence number of the DATA the peer has
// acknowledged so far (as seen by Recv).
func (c *Conn) Acked() uint64 { return c.acked.Load() }

// Close says goodbye with CLOSE (code and reason; CodeNormal for an
// orderly close) and closes the connection.
func (c *Conn) Close(code Code, reason string) error {
	werr := c.write(func(b []byte) []byte { return AppendClose(b, code, reason) })
	if err := c.nc.Close(); err != nil {
		return err
	}
	return werr
}

func (c *Conn) write(appendFrame func([]byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.out = appendFrame(c.out[:0])
	_, err := c.nc.Write(c.out)
	return err
}

// Recv returns the next DATA payload from the peer, in order, each once
// (a retransmission is acknowledged again and skipped). It acknowledges
// DATA (cumulatively, once per read), answers PINGs, records ACKs (Acked),
// and returns a *CloseError when the peer sends CLOSE. The payload is valid
// until the next Recv.
func (c *Conn) Recv() ([]byte, error) {
	for {
		var reply []byte
		for {
			f, ok, err := c.dec.Next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			switch f.Type {
			case TypeData:
				switch {
				case f.Seq == c.recvNext:
					c.recvNext++
					if err := c.write(func(b []byte) []byte { return AppendAck(append(b, reply...), f.Seq) }); err != nil {
						return nil, err
					}
					return f.Payload, nil
				case f.Seq < c.recvNext:
					reply = AppendAck(reply, c.recvNext-1)
				default:
					return nil, fmt.Errorf("frame: DATA %d after %d: %w", f.Seq, c.recvNext-1, ErrMalformed)
				}
			case TypeAck:
				for a := c.acked.Load(); f.Seq > a && !c.acked.CompareAndSwap(a, f.Seq); a = c.acked.Load() {
				}
			case TypePing:
				reply = AppendPong(reply, f.Nonce)
			case TypeClose:
				return nil, &CloseError{Code: f.Code, Reason: string(f.Reason)}
			}
		}
		if len(reply) > 0 {
			if err := c.write(func(b []byte) []byte { return append(b, reply...) }); err != nil {
				return nil, err
			}
		}
		n, err := c.nc.Read(c.buf)
		if n > 0 {
			c.dec.Feed(c.buf[:n])
		}
		if err != nil && n == 0 {
			return nil, err
		}
	}
}
