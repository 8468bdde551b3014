// Package testpeer is the peer that tests of netwheel's servers dial: a TCP
// connection on which the test writes the bytes it means the server to get,
// as it pleases (raw input, frames encoded with netserver/frame's functions,
// malformed ones, cut anywhere), and reads the server's frames through a
// frame.Conn. The frame.Conn answers nothing until the test says so
// (Frames.SetReplies), so that every frame the server gets is one the test
// wrote. For a peer that keeps sending numbered DATA and checks the echoes,
// see StartEchoes.
//
// It is for tests: it imports netserver/frame and testing, never netserver,
// so that the tests of both may use it.
package testpeer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netwheel/netwheel/netserver/frame"
)

// Peer is a test's connection to a server. The embedded net.Conn is the
// connection itself (Go sets TCP_NODELAY on it, so every write leaves at
// once as segments of its own): raw reads and writes, deadlines, Close.
//
// Ownership: one goroutine at a time reads (Next, WaitClose, Frames' reads,
// or the reader StartEchoes starts); writes may come from another. Push and
// WaitClose fail the test and so belong to the test's goroutine. mu guards
// tally, written by the echo reader and by SendNext.
type Peer struct {
	net.Conn
	Frames *frame.Conn // reads the server's frames; answers only what SetReplies says (nothing at first)
	Dialed time.Time   // before the dial: a lower bound for the server's open

	t     testing.TB
	mu    sync.Mutex
	tally Tally
	done  chan struct{} // closed when the echo reader has ended
}

// Dial connects to addr and returns a Peer that accepts frames of length up
// to max (0: frame.DefaultMax); the test's cleanup closes it. It fails
// nothing, so any goroutine may call it.
func Dial(t testing.TB, addr string, max int) (*Peer, error) {
	dialed := time.Now() // before the dial: the server may start its timers before Dial returns
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	return New(t, nc, dialed, max), nil
}

// New returns a Peer over nc, dialed at dialed, that accepts frames of
// length up to max (0: frame.DefaultMax).
func New(t testing.TB, nc net.Conn, dialed time.Time, max int) *Peer {
	fc := frame.NewConn(nc, max)
	fc.SetReplies(0)
	return &Peer{Conn: nc, Frames: fc, Dialed: dialed, t: t}
}

// Push writes b, as it is, to the server, and fails the test if it cannot.
func (p *Peer) Push(b []byte) {
	p.t.Helper()
	if _, err := p.Write(b); err != nil {
		p.t.Fatalf("testpeer: write: %v", err)
	}
}

// Next reads the server's next frame, failing after timeout (at once if it
// is not positive). Closed(err) says the server closed the connection. The
// frame is the caller's to keep.
func (p *Peer) Next(timeout time.Duration) (frame.Frame, error) {
	if err := p.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return frame.Frame{}, err
	}
	f, err := p.Frames.Next()
	if err != nil {
		return frame.Frame{}, err
	}
	f.Payload = append([]byte(nil), f.Payload...)
	f.Reason = append([]byte(nil), f.Reason...)
	return f, nil
}

// WaitClose reads until the server closes the connection, each read failing
// the test after timeout, and returns the code of the server's CLOSE (0:
// none came) and when the connection ended.
func (p *Peer) WaitClose(timeout time.Duration) (frame.Code, time.Time) {
	p.t.Helper()
	var code frame.Code
	for {
		f, err := p.Next(timeout)
		if Closed(err) {
			return code, time.Now()
		}
		if err != nil {
			p.t.Fatalf("testpeer: waiting for the server to close: %v", err)
		}
		if f.Type == frame.TypeClose {
			code = f.Code
		}
	}
}

// Closed reports whether err, from a read, means that the server closed the
// connection: an EOF, or a reset.
func Closed(err error) bool {
	return errors.Is(err, io.EOF) || err != nil && strings.Contains(err.Error(), "connection reset")
}

// Tally is what a peer started with StartEchoes has seen.
type Tally struct {
	Sent   int        // DATA sent, with payloads "0", "1", ...
	Echoes int        // echoes received, each checked in order
	Err    error      // the first echo out of order, or an unexpected error
	Code   frame.Code // of the server's final CLOSE
	Closed time.Time  // when the final CLOSE arrived; zero before
}

// StartEchoes starts a goroutine that reads the echoes of the DATA that
// SendNext sends, requiring them in order, until the server's final CLOSE
// or an error; Wait waits for it, Tally reports. The replies are the
// test's to set before.
func (p *Peer) StartEchoes() {
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		for {
			b, err := p.Frames.Recv()
			p.mu.Lock()
			var ce *frame.CloseError
			switch {
			case errors.As(err, &ce):
				p.tally.Code, p.tally.Closed = ce.Code, time.Now()
			case err != nil:
				p.fail(fmt.Errorf("before the final CLOSE: %w", err))
			case string(b) != fmt.Sprint(p.tally.Echoes):
				p.fail(fmt.Errorf("echo %q, want %d", b, p.tally.Echoes))
			default:
				p.tally.Echoes++
			}
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
}

// fail records the first error; mu is held.
func (p *Peer) fail(err error) {
	if p.tally.Err == nil {
		p.tally.Err = err
	}
}

// SendNext sends the next numbered DATA; it reports false once the server's
// final CLOSE came, the frame.Conn refuses (GOAWAY) or a send failed. Any
// goroutine.
func (p *Peer) SendNext() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tally.Closed.IsZero() || p.tally.Err != nil {
		return false
	}
	if _, err := p.Frames.Send(fmt.Appendf(nil, "%d", p.tally.Sent)); err != nil {
		if !errors.Is(err, frame.ErrGoingAway) {
			p.fail(fmt.Errorf("send %d: %w", p.tally.Sent, err))
		}
		return false
	}
	p.tally.Sent++
	return true
}

// SendEvery calls SendNext every period until it reports false or the echo
// reader ends.
func (p *Peer) SendEvery(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for p.SendNext() {
		select {
		case <-t.C:
		case <-p.done:
			return
		}
	}
}

// Wait waits for the echo reader to end, failing the test after within, and
// returns the tally.
func (p *Peer) Wait(within time.Duration) Tally {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.t.Fatal("testpeer: the connection did not end")
	}
	return p.Tally()
}

// Tally returns what the echo reader has seen so far. Any goroutine.
func (p *Peer) Tally() Tally {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tally
}
