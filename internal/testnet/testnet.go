// Package testnet gives tests a TCP link with a real round-trip time
// without privileges: Proxy listens on 127.0.0.1, forwards each connection
// to a target, and holds every byte for a one-way delay (with jitter) in
// each direction before passing it on. Order, the byte stream and
// half-closes are kept; nothing is lost, duplicated or reordered, so it is
// a long link, not a lossy one (use a network namespace with netem for
// loss). Each direction holds a bounded amount of data, so a peer that
// does not read pushes back on the sender as a real link would. A
// half-close is delayed like the bytes before it; an error on either side
// (a reset) closes both at once, dropping what is held.
//
// It is for tests, not for measuring: the delay is a lower bound, kept
// strictly (a byte never leaves early), and lateness depends on the Go
// scheduler and the machine's load.
//
// Serve is the accept loop of the tests' own servers: a goroutine per
// connection, everything closed and waited for at the test's cleanup.
package testnet

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes a Proxy's link. Zero values: no delay, no jitter,
// DefaultBuffer.
type Config struct {
	// Target is the host:port every accepted connection is forwarded to.
	Target string
	// Delay is the one-way delay of each direction: a byte read at t is
	// written on at t+Delay at the earliest. The round-trip time through
	// the proxy is at least twice Delay.
	Delay time.Duration
	// Jitter adds a random extra delay in [0, Jitter] to each piece the
	// proxy reads. A piece never overtakes the one before it: its hold ends
	// no earlier than the previous piece's.
	Jitter time.Duration
	// Buffer bounds the bytes each direction of a connection holds: its
	// queue takes Buffer/16 KiB pieces (rounded up) of at most 16 KiB, and
	// one more piece may wait on each side of it. Reads from the sender
	// stop while it is full. 0 means DefaultBuffer.
	Buffer int
}

// DefaultBuffer is the bytes each direction holds when Config.Buffer is 0:
// 1 MiB, 20 MB/s over a 50 ms one-way delay.
const DefaultBuffer = 1 << 20

// pieceSize is the largest piece a direction reads at once.
const pieceSize = 16 << 10

// Proxy is a delaying TCP proxy. Its methods may be called from any
// goroutine.
//
// Ownership: the accept goroutine and two goroutines per direction of each
// connection (a reader and a writer) are counted in wg; Close stops them
// all (closing the listener and every connection) and waits for them. mu
// guards links and closed.
type Proxy struct {
	cfg    Config
	ln     net.Listener
	ctx    context.Context // cancelled by Close: ends dials and holds
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool
}

// Listen starts a Proxy on 127.0.0.1 (an ephemeral port) for cfg.
func Listen(cfg Config) (*Proxy, error) {
	if cfg.Target == "" {
		return nil, errors.New("testnet: no target")
	}
	if cfg.Delay < 0 || cfg.Jitter < 0 || cfg.Buffer < 0 {
		return nil, errors.New("testnet: negative delay, jitter or buffer")
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = DefaultBuffer
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, ln: ln, links: make(map[*link]struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Close stops accepting, closes every connection (what the proxy holds is
// dropped) and returns once every goroutine of the proxy has ended.
// Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for _, l := range links {
		l.abort()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil // closed before
	}
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by Close; Accept on 127.0.0.1 fails for nothing else we can fix
		}
		p.wg.Go(func() { p.connect(c.(*net.TCPConn)) })
	}
}

// connect dials the target for the accepted connection c and starts its two
// directions.
func (p *Proxy) connect(c *net.TCPConn) {
	d := net.Dialer{Timeout: 5 * time.Second}
	tc, err := d.DialContext(p.ctx, "tcp", p.cfg.Target)
	if err != nil {
		_ = c.Close()
		return
	}
	l := &link{p: p, a: c, b: tc.(*net.TCPConn), dead: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.abort()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.wg.Go(func() { p.direction(l, l.a, l.b) })
	p.wg.Go(func() { p.direction(l, l.b, l.a) })
}

// link is one proxied connection: a is the client's side, b the target's.
// dead is closed, and both sides closed, by the first abort; halves counts
// the directions that ended with a forwarded half-close.
type link struct {
	p      *Proxy
	a, b   *net.TCPConn
	once   sync.Once
	dead   chan struct{}
	halves atomic.Int32
}

// abort closes both sides, ends both directions and forgets the link.
// Idempotent; any goroutine.
func (l *link) abort() {
	l.once.Do(func() {
		close(l.dead)
		_ = l.a.Close()
		_ = l.b.Close()
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// piece is what a direction read, held until due; eof marks the sender's
// half-close.
type piece struct {
	b   []byte
	due time.Time
	eof bool
}

// direction forwards src to dst: it reads here and hands the pieces to a
// writer goroutine through a bounded queue.
func (p *Proxy) direction(l *link, src, dst *net.TCPConn) {
	q := make(chan piece, max(1, (p.cfg.Buffer+pieceSize-1)/pieceSize))
	p.wg.Go(func() { p.write(l, dst, q) })
	defer close(q)
	var last time.Time
	buf := make([]byte, pieceSize)
	for {
		n, err := src.Read(buf)
		now := time.Now()
		due := now.Add(p.cfg.Delay)
		if p.cfg.Jitter > 0 {
			due = due.Add(rand.N(p.cfg.Jitter + 1))
		}
		if due.Before(last) {
			due = last // no overtaking
		}
		last = due
		if n > 0 {
			select {
			case q <- piece{b: append([]byte(nil), buf[:n]...), due: due}:
			case <-l.dead:
				return
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			select {
			case q <- piece{due: due, eof: true}:
			case <-l.dead:
			}
			return
		case err != nil:
			l.abort() // a reset, or Close
			return
		}
	}
}

// write writes each piece of q to dst once it is due, and forwards the
// half-close; the link ends when both directions have half-closed, or at
// the first error.
func (p *Proxy) write(l *link, dst *net.TCPConn, q <-chan piece) {
	t := time.NewTimer(0)
	defer t.Stop()
	for pc := range q {
		for wait := time.Until(pc.due); wait > 0; wait = time.Until(pc.due) {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-l.dead:
				return
			}
		}
		if pc.eof {
			if dst.CloseWrite() != nil {
				l.abort()
				return
			}
			if l.halves.Add(1) == 2 {
				l.abort() // both ends said all they had to say
			}
			return
		}
		if _, err := dst.Write(pc.b); err != nil {
			l.abort()
			return
		}
	}
	l.abort() // the reader stopped without a half-close
}
