package attack

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver/frame"
)

// client is one connection's reader and its shared state. Framed, the
// protocol is frame.Conn's: it sends the DATA, acknowledges the server's,
// answers its PINGs (as SetReplies allows) and decodes its CLOSE; the
// reader goroutine (read) takes the frames out of it to count and time the
// echoes. Raw, the reader counts echo bytes. Roles that send what the
// protocol forbids write to c, the socket, directly (hostile.go).
//
// Ownership: the reader goroutine owns fc's reading side and the raw
// parse state. end, endAt, closeCode are written by the reader before it
// closes done and read by others only after <-done. answered, pings,
// pongs are written by the reader, read by the role (atomic); closing is
// set by the role, read by the reader. ps and out are the role
// goroutine's (send).
type client struct {
	c     net.Conn    // the socket, as w wraps it
	w     *wire       // stamps writes and, for the splitter, cuts them
	fc    *frame.Conn // framed: the protocol over c; nil when raw
	proto Proto
	ctr   *Counters

	// set before read starts
	size   int                                                 // raw: message size (AnswerEcho: an answer's size)
	expect AnswerKind                                          // raw: how answers are read
	prefix []byte                                              // raw: what an answer begins with (AnswerLine, AnswerHTTP)
	onEcho func(k uint64, at time.Time)                        // k-th echo (1-based) arrived
	onData func(seq uint64, p []byte, at time.Time) (dup bool) // framed: every DATA, before echo counting; p is valid during the call
	onRaw  func(b []byte)                                      // raw: every byte that arrived, in order; b is valid during the call

	answered   atomic.Int64  // unix nanos when the server first answered message answerFrom or later: framed, an ACK of it; raw, its whole echo
	answerFrom atomic.Uint64 // the message (1-based) whose answer answered and onEcho's waiters look for; 0 means 1
	closing    atomic.Bool
	pings      atomic.Int64
	pongs      atomic.Int64
	wrong      atomic.Uint64 // raw: answers that were not what -expect says, as the reader found them
	right      uint64        // raw: answers that were what -expect says; the reader's until done
	head       []byte        // raw: the first headMax bytes the server sent; the reader's until done
	sending    atomic.Uint64 // raw: messages handed to the socket so far (AnswerAny: what an arrival answers)
	done       chan struct{}

	keepalives int      // quiet roles': keep-alive messages sent while waiting at the barrier
	ps         [][]byte // send's: the payloads of one batch
	out        []byte   // send's: raw, the bytes of one batch

	end       string
	endAt     time.Time
	closeCode frame.Code
}

// newClient returns a client over c. Framed, it answers nothing until its
// role says what (replies): each role chooses how polite it is.
func newClient(c net.Conn, proto Proto, ctr *Counters) *client {
	w := &wire{Conn: c}
	cl := &client{c: w, w: w, proto: proto, ctr: ctr, done: make(chan struct{})}
	if proto == Framed {
		cl.fc = frame.NewConn(w, frame.DefaultMax)
		cl.fc.SetReplies(0)
	}
	return cl
}

// replies sets what a framed connection answers on its own (ACKs, PONGs);
// raw connections answer nothing. Any goroutine.
func (cl *client) replies(r frame.Reply) {
	if cl.fc != nil {
		cl.fc.SetReplies(r)
	}
}

// send sends n messages of payload p in one write: framed, DATA frames
// numbered on from the last (frame.Conn numbers them); raw, p n times. It
// returns how many messages were written whole, as sendAll does. The
// role's goroutine; allocation-free once its buffers have grown.
func (cl *client) send(p []byte, n int) (int, error) {
	for len(cl.ps) < n {
		cl.ps = append(cl.ps, p)
	}
	ps := cl.ps[:n]
	for i := range ps {
		ps[i] = p
	}
	return cl.sendAll(ps)
}

// sendAll sends the messages ps in one write and returns how many of them
// were written whole: all of them, or, when the write fails, raw, those
// before the byte it failed at; framed, 0 (frame.Conn does not say how
// far a failed write got: the server's echoes show it). The role's
// goroutine.
func (cl *client) sendAll(ps [][]byte) (int, error) {
	if cl.fc != nil {
		if _, err := cl.fc.SendAll(ps...); err != nil {
			return 0, err
		}
		return len(ps), nil
	}
	cl.out = cl.out[:0]
	for _, p := range ps {
		cl.out = append(cl.out, p...)
	}
	cl.sending.Add(uint64(len(ps))) // before the write: an answer may come before it returns
	n, err := cl.c.Write(cl.out)
	if err == nil {
		return len(ps), nil
	}
	whole := 0
	for _, p := range ps {
		if n < len(p) {
			break
		}
		n -= len(p)
		whole++
	}
	return whole, err
}

// lastWrite returns the start of the last write that completed.
func (cl *client) lastWrite() time.Time { return time.Unix(0, cl.w.lastWrite.Load()) }

// shut closes the connection from the client side (if the server has not)
// and waits for the reader. Framed connections say goodbye with CLOSE.
func (cl *client) shut() {
	select {
	case <-cl.done:
		return
	default:
	}
	cl.closing.Store(true)
	if cl.fc != nil {
		_ = cl.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_ = cl.fc.Close(frame.CodeNormal, "load test done")
	} else {
		_ = cl.c.Close()
	}
	<-cl.done
}

// answeredAt returns when the server first answered message answerFrom or a
// later one (framed: an ACK of it; raw: its whole echo), or the zero time.
func (cl *client) answeredAt() time.Time {
	if ns := cl.answered.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// closedByServer reports whether the reader ended because the server
// closed: not when the harness closed, nor when the reader gave up on the
// server's bytes (report.EndBadServerFrame). Only after <-cl.done.
func (cl *client) closedByServer() bool {
	return cl.end != report.EndClient && cl.end != report.EndBadServerFrame && cl.end != ""
}

// closedByServerYet is closedByServer without waiting: false while the
// reader has not ended.
func (cl *client) closedByServerYet() bool {
	select {
	case <-cl.done:
		return cl.closedByServer()
	default:
		return false
	}
}

// read is the reader goroutine: it takes the server's frames out of the
// frame.Conn (or counts raw echo bytes), counts and times the echoes, and
// records how the connection ended.
func (cl *client) read() {
	defer close(cl.done)
	defer cl.ctr.Open.Add(-1)
	if cl.fc != nil {
		cl.readFramed()
	} else {
		cl.readRaw()
	}
	_ = cl.c.Close()
}

func (cl *client) readFramed() {
	var echoes uint64
	for {
		f, err := cl.fc.Next()
		now := cl.fc.ReadTime()
		if err != nil {
			if protocolError(err) {
				// The server's bytes, not its close: named apart from
				// the protocol_error its CLOSE frame may say.
				cl.ctr.Errors.Add(1)
				cl.finish(report.EndBadServerFrame, now)
				return
			}
			cl.ended(err, now)
			return
		}
		switch f.Type {
		case frame.TypeData:
			dup := false
			if cl.onData != nil {
				dup = cl.onData(f.Seq, f.Payload, now)
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
		case frame.TypePong:
			cl.pongs.Add(1)
		case frame.TypeAck:
			if f.Seq >= max(cl.answerFrom.Load(), 1) {
				cl.answered.CompareAndSwap(0, now.UnixNano())
			}
		case frame.TypeClose:
			if cl.closeCode == 0 {
				cl.closeCode, cl.endAt = f.Code, now
			}
		}
	}
}

// protocolError reports whether err is the server's stream breaking the
// protocol rather than the connection ending.
func protocolError(err error) bool {
	return errors.Is(err, frame.ErrMalformed) || errors.Is(err, frame.ErrType) || errors.Is(err, frame.ErrTooLarge)
}

// rawReadBuf is the read buffer of a raw client of message size size:
// four messages, between 4 and 16 KiB. Answers are cut out of the stream
// whatever its segmentation, so any size reads correctly; the bound keeps
// 8 000 idle clients' buffers at 32 MiB rather than 128.
func rawReadBuf(size int) int {
	return min(max(4*size, 4<<10), 16<<10)
}

// readRaw reads the server's bytes and counts its answers as cl.expect
// says: cut out of the stream by their parser (answer.go), or, for
// AnswerAny, whatever arrives answering every message sent before it;
// AnswerNone counts none.
func (cl *client) readRaw() {
	buf := make([]byte, rawReadBuf(cl.size))
	var ans answers
	if cl.expect != AnswerAny && cl.expect != AnswerNone {
		ans = newAnswers(Expect{Kind: cl.expect, Prefix: cl.prefix}, cl.size)
	}
	var echoes uint64
	for {
		n, err := cl.c.Read(buf)
		now := time.Now()
		if n > 0 {
			if len(cl.head) < headMax {
				cl.head = append(cl.head, buf[:min(n, headMax-len(cl.head))]...)
			}
			if cl.onRaw != nil {
				cl.onRaw(buf[:n])
			}
			var k uint64
			switch {
			case ans != nil:
				done, wrong := ans.feed(buf[:n])
				k = uint64(done)
				cl.right += uint64(done - wrong)
				if wrong > 0 {
					cl.wrong.Add(uint64(wrong))
				}
			case cl.expect == AnswerAny:
				if sent := cl.sending.Load(); sent > echoes {
					k = sent - echoes
				}
			}
			for end := echoes + k; echoes < end; {
				echoes++
				if echoes >= max(cl.answerFrom.Load(), 1) {
					cl.answered.CompareAndSwap(0, now.UnixNano())
				}
				cl.ctr.Recv.Add(1)
				if cl.onEcho != nil {
					cl.onEcho(echoes, now)
				}
			}
		}
		if err != nil {
			cl.ended(err, now)
			return
		}
	}
}

// headMax bounds the bytes of the server's first words a raw client
// keeps, to quote a refusal.
const headMax = 256

// refusal returns the server's words if it refused the connection, which
// it closed: raw, bytes that are no answer before the scenario could
// start: bytes before the client sent anything and before the
// connection's timer started (started), or wrong answers and never a
// right one, whenever they came (a refusal may arrive before or after the
// client's first message, and is then taken for its answer); or an HTTP
// 5xx status at any time; framed, a CLOSE frame saying overload before
// the start. It returns the first line, Go-quoted and bounded, or "" if
// the server did not refuse. Only after <-cl.done.
func (cl *client) refusal(started bool) string {
	if cl.fc != nil {
		if !started && cl.closeCode == frame.CodeOverload {
			return "CLOSE " + cl.closeCode.String()
		}
		return ""
	}
	if len(cl.head) == 0 {
		return ""
	}
	unasked := !started && cl.sending.Load() == 0
	onlyWrong := cl.right == 0 && cl.wrong.Load() > 0
	if unasked || onlyWrong || httpUnavailable(cl.head) {
		return firstLine(cl.head)
	}
	return ""
}

// firstLine returns b's first line without its end, Go-quoted, at most 80
// bytes of it.
func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) > 80 {
		return strconv.Quote(string(b[:80])) + "..."
	}
	return strconv.Quote(string(b))
}

// httpUnavailable reports whether b begins an HTTP/1.x response whose
// status is 5xx: the server refused the request (503 at its limit).
func httpUnavailable(b []byte) bool {
	return len(b) >= 12 && bytes.HasPrefix(b, []byte("HTTP/1.")) && b[8] == ' ' && b[9] == '5'
}

// ended records how the connection ended, given the read error that ended
// it at now: the server's CLOSE code if one came, else ours, EOF, a reset
// or another error.
func (cl *client) ended(err error, now time.Time) {
	switch {
	case cl.closeCode != 0:
		cl.finish(cl.closeCode.String(), cl.endAt)
	case cl.closing.Load():
		cl.finish(report.EndClient, now)
	case errors.Is(err, io.EOF):
		cl.finish("eof", now)
	case errors.Is(err, syscall.ECONNRESET):
		cl.finish("reset", now)
	default:
		cl.finish("read_error", now)
	}
}

func (cl *client) finish(end string, at time.Time) {
	cl.end, cl.endAt = end, at
	cl.ctr.end(end)
}

// wire is a connection's socket as the client writes to it: each write
// that completes stamps its start (lastWrite: a close measured from it can
// only look late, never early), and with a cutter every write goes out in
// pieces. Reads pass through.
type wire struct {
	net.Conn
	lastWrite atomic.Int64 // unix nanos
	cut       *cutter      // nil: writes go out whole
}

func (w *wire) Write(b []byte) (int, error) {
	if w.cut != nil {
		return w.cut.write(w, b)
	}
	return w.write(b)
}

func (w *wire) write(b []byte) (int, error) {
	t := time.Now()
	n, err := w.Conn.Write(b)
	if err == nil {
		w.lastWrite.Store(t.UnixNano())
	}
	return n, err
}

// cutter cuts a splitter connection's writes at random byte boundaries
// (cuts), sleeping now and then between pieces, and counts what it wrote.
// Its writes may come from the role's goroutine and the reader's (the
// frame.Conn's ACKs and PONGs): mu serializes them, rng, bytes and writes.
type cutter struct {
	mu     sync.Mutex
	rng    *rand.Rand
	bytes  uint64
	writes uint64
}

func (c *cutter) write(w *wire, b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := 0
	for _, k := range cuts(c.rng, len(b)) {
		n, err := w.write(b[done : done+k])
		done += n
		c.bytes += uint64(n)
		c.writes++
		if err != nil {
			return done, err
		}
		if c.rng.IntN(16) == 0 {
			time.Sleep(time.Duration(50+c.rng.IntN(450)) * time.Microsecond)
		}
	}
	return done, nil
}

// counts returns the bytes and writes so far.
func (c *cutter) counts() (bytes, writes uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.writes
}
