package frame

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is a small client of the framed protocol over a net.Conn. Send
// numbers and sends DATA; Recv returns the peer's DATA payloads in order,
// each once; Next, underneath it, returns every frame the peer sent. As the
// bytes arrive, the Conn acknowledges DATA (one cumulative ACK per read of
// the connection), answers PINGs with PONGs and records the peer's ACKs,
// unless SetReplies says otherwise. It keeps no copy of what it sends and
// does not retransmit: over TCP nothing is lost, and netwheel's server
// retransmits only to peers that stop acknowledging.
//
// When the server is going away (it shuts down, or the connection reached
// its maximum age) it sends GOAWAY at the start of its grace. The Conn
// answers with its own GOAWAY, after any DATA being written, and from then
// on refuses new DATA (Send returns ErrGoingAway) while it goes on
// acknowledging, answering PINGs and returning what arrives: the echoes of
// what was in flight come out of Recv, then the server's final CLOSE as a
// *CloseError. GoingAway reports the notice.
//
// One goroutine at a time may read (Next, Recv, ReadTime). Send, SendAll,
// Ping, Close and GoingAway may be called from any goroutine, also while a
// read runs: frames never interleave. Acked and SetReplies may be called
// from any goroutine.
type Conn struct {
	nc net.Conn

	// The fields marked "reader" belong to the goroutine reading (Next,
	// Recv, ReadTime), one at a time.
	dec       *Decoder  // reader: splits what was read into frames
	buf       []byte    // reader: the read buffer
	reply     []byte    // reader: the ACK and PONGs owed for one read
	scanned   int       // reader: bytes at the front of dec's undecoded input the scan has done
	scanStop  bool      // reader: the scan met a CLOSE, a gap or a malformed frame; no more replies
	answered  bool      // reader: the scan has answered a GOAWAY (it answers once)
	arrived   uint64    // reader: DATA 1..arrived has arrived (as scanned)
	delivered uint64    // reader: DATA 1..delivered has been returned by Next
	retx      bool      // reader: the DATA Next returned last was a retransmission
	readAt    time.Time // reader: when the last read of nc returned
	rerr      error     // reader: a read error that came with bytes, returned once they are taken
	perr      error     // reader: a DATA out of sequence, returned from then on

	// wmu serializes every write (Send, SendAll, Ping, Close and the
	// reader's replies), so that frames never interleave, and guards the
	// fields marked "wmu".
	wmu      sync.Mutex
	sendNext uint64 // wmu: the sequence number of the next DATA sent
	out      []byte // wmu: the frames being written
	werr     error  // wmu: the first write error; nothing is written after it
	away     GoAway // wmu: the peer's latest GOAWAY, if awayOK
	awayOK   bool   // wmu: a GOAWAY has arrived
	refuse   bool   // wmu: the Conn answered a GOAWAY: no new DATA
	peerDone bool   // wmu: the peer's final CLOSE has arrived: Close writes nothing

	// Any goroutine, atomically.
	acked   atomic.Uint64 // the highest sequence number the peer acknowledged
	replies atomic.Uint32 // a Reply: what the reader answers on its own
}

// Reply is a set of the answers a Conn writes on its own as frames arrive.
type Reply uint8

// Replies. A Conn starts with ReplyAll, which is what the protocol asks of
// a peer; anything less is for tests of a server's timeouts.
const (
	ReplyAck    Reply = 1 << iota // acknowledge DATA
	ReplyPong                     // answer PING with PONG
	ReplyGoAway                   // answer GOAWAY with GOAWAY, and send no new DATA after it
	ReplyAll    = ReplyAck | ReplyPong | ReplyGoAway
)

// ErrGoingAway is what Send and SendAll return once the peer has said it is
// going away (GOAWAY) and the Conn has answered: no new DATA may start.
// The errors returned wrap it (errors.Is) and name the peer's code.
var ErrGoingAway = errors.New("frame: the peer is going away")

// GoAway is the notice of a peer going away: why (CodeShutdown,
// CodeMaxAge), the longest it waits before its final CLOSE, counted from
// At, and its reason. The Conn keeps no timer: a client that will not wait
// for a peer that breaks its word sets a read deadline (NetConn) of
// At+Grace and a round trip or two.
type GoAway struct {
	Code   Code
	Grace  time.Duration
	Reason string
	At     time.Time // when the read that brought it returned
}

// CloseError is what Recv returns when the peer sent CLOSE.
type CloseError struct {
	Code   Code
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("frame: the peer closed: %s (%d): %s", e.Code, uint16(e.Code), e.Reason)
}

// Dial connects to a framed server at addr (host:port) and returns a Conn
// over the connection that accepts frames up to DefaultMax.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewConn(nc, 0), nil
}

// NewConn speaks the framed protocol over nc, accepting frames of length at
// most max (0 means DefaultMax). The Conn owns nc from now on: read and
// write it only through the Conn (but see NetConn). It allocates a 16 KiB
// read buffer.
func NewConn(nc net.Conn, max int) *Conn {
	c := &Conn{nc: nc, dec: NewDecoder(max), buf: make([]byte, 16<<10), sendNext: 1}
	c.replies.Store(uint32(ReplyAll))
	return c
}

// NetConn returns the underlying connection, to set deadlines or socket
// options. A deadline passed makes Next, Recv or a write return an error
// that satisfies errors.Is(err, os.ErrDeadlineExceeded). Next and Recv may
// be called again after a read deadline (no frame is lost); after a
// failed write the Conn writes nothing more (see SendAll). Writing to the
// connection directly bypasses the Conn: it is not serialized with the
// Conn's writes, and DATA written that way does not advance Send's
// sequence numbers. It is for tests that must send what the protocol
// forbids (a frame cut off, a bad type), on a connection the Conn then
// only reads.
func (c *Conn) NetConn() net.Conn { return c.nc }

// SetReplies sets which answers the Conn writes on its own from now on,
// as reads bring frames: ReplyAll (the default) acknowledges DATA and
// answers PINGs. Without ReplyAck the peer's DATA goes unacknowledged (a
// netwheel server then retransmits it and gives up); without ReplyPong its
// PINGs go unanswered (its keepalive then closes the connection); without
// ReplyGoAway the Conn neither answers a GOAWAY nor refuses new DATA after
// it, like a peer that ignores the notice. Any goroutine; O(1).
func (c *Conn) SetReplies(r Reply) { c.replies.Store(uint32(r)) }

// Send sends payload as the next DATA frame and returns its sequence
// number, as SendAll does. Any goroutine.
func (c *Conn) Send(payload []byte) (uint64, error) { return c.SendAll(payload) }

// SendAll sends each payload as the next DATA frame, all in one write, and
// returns the sequence number of the first (the others follow it); none
// sends nothing. It copies the payloads into the Conn's write buffer, which
// grows to the largest batch sent; it does not allocate after that. It
// blocks until the write is done, so it is paced by the peer's reading. A
// failed write (a deadline passed, the connection broke) is returned now
// and by every later write: part of a frame may have been written, and
// anything after it would be garbage to the peer. Once the peer's GOAWAY
// has been read and answered it sends nothing and returns an error
// wrapping ErrGoingAway; a write under way then completes first. Any
// goroutine.
func (c *Conn) SendAll(payloads ...[]byte) (first uint64, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.refuse {
		return 0, fmt.Errorf("%w (%s): no new DATA, the final CLOSE comes within %v", ErrGoingAway, c.away.Code, c.away.Grace)
	}
	first = c.sendNext
	if len(payloads) == 0 {
		return first, nil
	}
	c.out = c.out[:0]
	for i, p := range payloads {
		c.out = AppendData(c.out, first+uint64(i), p)
	}
	if err := c.writeLocked(c.out); err != nil {
		return 0, err
	}
	c.sendNext += uint64(len(payloads))
	return first, nil
}

// Ping sends a PING; the peer's PONG comes out of Next (Recv skips it). It
// is not refused after a GOAWAY: a PING starts nothing the peer must
// finish. Any goroutine.
func (c *Conn) Ping(nonce uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.out = AppendPing(c.out[:0], nonce)
	return c.writeLocked(c.out)
}

// GoingAway reports the peer's latest GOAWAY as far as reads have brought
// it, and whether there was one. Any goroutine; O(1).
func (c *Conn) GoingAway() (GoAway, bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.away, c.awayOK
}

// Acked reports the highest sequence number of the DATA the peer has
// acknowledged so far, as far as reads have brought its ACKs. Any
// goroutine; O(1).
func (c *Conn) Acked() uint64 { return c.acked.Load() }

// Close says goodbye with CLOSE (code and reason; CodeNormal for an
// orderly close) and closes the connection, which ends a Next or Recv
// blocked in a read with net.ErrClosed. After the peer's own CLOSE has
// been read it writes nothing and only closes the connection, as the
// protocol asks: the peer reads no more. The CLOSE write blocks like any
// other: set a write deadline (NetConn) first if the peer may not be
// reading. It returns the error of closing the connection, else that of
// the write. Any goroutine.
func (c *Conn) Close(code Code, reason string) error {
	c.wmu.Lock()
	var werr error
	if !c.peerDone {
		c.out = AppendClose(c.out[:0], code, reason)
		werr = c.writeLocked(c.out)
	}
	c.wmu.Unlock()
	if err := c.nc.Close(); err != nil {
		return err
	}
	return werr
}

// writeLocked writes b whole, unless an earlier write failed; wmu is held.
func (c *Conn) writeLocked(b []byte) error {
	if c.werr != nil {
		return c.werr
	}
	if _, err := c.nc.Write(b); err != nil {
		c.werr = err
		return err
	}
	return nil
}
