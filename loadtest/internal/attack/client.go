package attack

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netwheel/netwheel/netserver/frame"
)

// client is one connection's reader and its shared state. The reader
// goroutine (read) owns buf and the parse state; the role's goroutine writes
// through write. Fields under "set before read starts" are read-only after.
//
// Ownership: end, endAt, closeCode are written by the reader before it
// closes done and read by others only after <-done. lastWrite is atomic
// (both goroutines write). closing and answerPings are atomic (set by the
// role, read by the reader). answered is atomic (written once by the
// reader, read by the role).
type client struct {
	c     net.Conn
	proto Proto
	ctr   *Counters

	// set before read starts
	ack    bool
	size   int                                                 // raw: message size
	onEcho func(k uint64, at time.Time)                        // k-th echo (1-based) arrived
	onData func(seq uint64, p []byte, at time.Time) (dup bool) // framed: every DATA, before echo counting; p is valid during the call
	onRaw  func(b []byte)                                      // raw: every byte that arrived, in order; b is valid during the call
	// control, if set, takes the ACKs and PONGs the reader would write, so
	// that the role's goroutine sends them in its own way (the splitter
	// cuts them like its messages); b is the reader's and valid during the
	// call.
	control func(b []byte)

	lastWrite   atomic.Int64 // unix nanos of the start of the last write that completed
	answered    atomic.Int64 // unix nanos when the server first answered: framed, its first ACK; raw, the first whole echo
	answerPings atomic.Bool  // answer the server's PINGs with PONG
	closing     atomic.Bool
	pings       atomic.Int64
	pongs       atomic.Int64
	done        chan struct{}

	wmu sync.Mutex // serializes writes, so frames never interleave

	end       string
	endAt     time.Time
	closeCode frame.Code
}

func newClient(c net.Conn, proto Proto, ctr *Counters) *client {
	return &client{c: c, proto: proto, ctr: ctr, done: make(chan struct{})}
}

// write writes b whole; any goroutine.
func (cl *client) write(b []byte) error {
	cl.wmu.Lock()
	t := time.Now() // before the write: a close measured from it can only look late, never early
	_, err := cl.c.Write(b)
	cl.wmu.Unlock()
	if err == nil {
		cl.lastWrite.Store(t.UnixNano())
	}
	return err
}

// shut closes the connection from the client side (if the server has not)
// and waits for the reader. Framed connections say goodbye with CLOSE.
func (cl *client) shut() {
	select {
	case <-cl.done:
		return
	default:
	}
	cl.closing.Store(true)
	if cl.proto == Framed {
		_ = cl.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_ = cl.write(frame.AppendClose(nil, frame.CodeNormal, "load test done"))
	}
	_ = cl.c.Close()
	<-cl.done
}

// answeredAt returns when the server first answered a message (framed: its
// first ACK; raw: the first whole echo), or the zero time.
func (cl *client) answeredAt() time.Time {
	if ns := cl.answered.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// closedByServer reports whether the reader ended because the server closed.
func (cl *client) closedByServer() bool {
	return cl.end != "client" && cl.end != ""
}

// read is the reader goroutine: it parses the server's frames (or counts raw
// echo bytes), answers pings and acks as configured, and records how the
// connection ended.
func (cl *client) read() {
	defer close(cl.done)
	defer cl.ctr.Open.Add(-1)
	buf := make([]byte, 16<<10)
	dec := frame.NewDecoder(frame.DefaultMax)
	var echoes, rawBytes, maxSeq, acked uint64
	var out []byte
	for {
		n, err := cl.c.Read(buf)
		now := time.Now()
		if n > 0 {
			if cl.proto == Raw {
				rawBytes += uint64(n)
				if cl.onRaw != nil {
					cl.onRaw(buf[:n])
				}
				for k := rawBytes / uint64(cl.size); echoes < k; {
					if echoes == 0 {
						cl.answered.CompareAndSwap(0, now.UnixNano())
					}
					echoes++
					cl.ctr.Recv.Add(1)
					if cl.onEcho != nil {
						cl.onEcho(echoes, now)
					}
				}
			} else {
				dec.Feed(buf[:n])
				out = out[:0]
				for {
					f, ok, perr := dec.Next()
					if perr != nil {
						cl.ctr.Errors.Add(1)
						cl.finish("protocol_error", now)
						_ = cl.c.Close()
						return
					}
					if !ok {
						break
					}
					switch f.Type {
					case frame.TypeData:
						dup := false
						if cl.onData != nil {
							dup = cl.onData(f.Seq, f.Payload, now)
						}
						if f.Seq > maxSeq {
							maxSeq = f.Seq
						}
						if !dup && f.Seq == echoes+1 {
							echoes++
							cl.ctr.Recv.Add(1)
							if cl.onEcho != nil {
								cl.onEcho(echoes, now)
							}
						}
					case frame.TypePing:
						cl.pings.Add(1)
						if cl.answerPings.Load() {
							out = frame.AppendPong(out, f.Nonce)
						}
					case frame.TypePong:
						cl.pongs.Add(1)
					case frame.TypeAck:
						cl.answered.CompareAndSwap(0, now.UnixNano())
					case frame.TypeClose:
						if cl.closeCode == 0 {
							cl.closeCode = f.Code
							cl.endAt = now
						}
					}
				}
				if cl.ack && maxSeq > acked {
					out = frame.AppendAck(out, maxSeq)
					acked = maxSeq
				}
				if len(out) > 0 && cl.closeCode == 0 {
					if cl.control != nil {
						cl.control(out)
					} else {
						_ = cl.write(out)
					}
				}
			}
		}
		if err != nil {
			switch {
			case cl.closeCode != 0:
				cl.finish(cl.closeCode.String(), cl.endAt)
			case cl.closing.Load():
				cl.finish("client", now)
			case errors.Is(err, io.EOF):
				cl.finish("eof", now)
			case errors.Is(err, syscall.ECONNRESET):
				cl.finish("reset", now)
			default:
				cl.finish("read_error", now)
			}
			_ = cl.c.Close()
			return
		}
	}
}

func (cl *client) finish(end string, at time.Time) {
	cl.end, cl.endAt = end, at
	cl.ctr.end(end)
}
