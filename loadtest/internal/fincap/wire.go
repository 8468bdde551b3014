// Package fincap timestamps the FIN segments a server sends on the loopback
// interface, as the kernel saw them pass, so that the harness can tell
// when a server closed a connection without counting its own scheduling
// delay to read the close. Linux only; it needs CAP_NET_RAW.
package fincap

import (
	"errors"
	"sync"
	"time"
)

// ErrUnsupported: no capture on this system, or not the privilege to open
// one; errors.Is works on the error Open returns.
var ErrUnsupported = errors.New("fincap: capture unsupported here")

// Capture records the first FIN the server at port sent to each local
// (client) port. Its methods may be called from any goroutine.
//
// Ownership: fins, waiting and closed are guarded by mu.
type Capture struct {
	port uint16

	mu      sync.Mutex
	fins    map[uint16]time.Time     // client port -> the server's first FIN to it, not yet taken
	waiting map[uint16]chan struct{} // client port -> closed when its FIN is recorded
	closed  bool

	stop func() // ends the reader and waits for it
}

func newCapture(port uint16) *Capture {
	return &Capture{port: port, fins: map[uint16]time.Time{}, waiting: map[uint16]chan struct{}{}}
}

// record notes a FIN from the server to client port at t; one that comes
// while an earlier one to the port waits to be taken is a retransmission,
// and ignored.
func (c *Capture) record(client uint16, t time.Time) {
	c.mu.Lock()
	if _, ok := c.fins[client]; !ok {
		c.fins[client] = t
		if w, ok := c.waiting[client]; ok {
			close(w)
			delete(c.waiting, client)
		}
	}
	c.mu.Unlock()
}

// Take returns, and forgets, when the server's FIN to client port passed,
// waiting up to timeout for the capture to read it; ok is false if none
// came. One caller at a time per port.
func (c *Capture) Take(client uint16, timeout time.Duration) (t time.Time, ok bool) {
	c.mu.Lock()
	if t, ok = c.fins[client]; ok || c.closed {
		delete(c.fins, client)
		c.mu.Unlock()
		return t, ok
	}
	w := make(chan struct{})
	c.waiting[client] = w
	c.mu.Unlock()
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	select {
	case <-w:
	case <-tm.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting[client] == w {
		delete(c.waiting, client)
	}
	t, ok = c.fins[client]
	delete(c.fins, client)
	return t, ok
}

// Close stops the capture and waits for its goroutine; waiting Takes
// return at once.
func (c *Capture) Close() {
	c.stop()
	c.mu.Lock()
	c.closed = true
	for p, w := range c.waiting {
		close(w)
		delete(c.waiting, p)
	}
	c.mu.Unlock()
}

// parse reads an IPv4 packet p (no link header) and reports the TCP ports
// and whether it carries FIN.
func parse(p []byte) (src, dst uint16, fin, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != 6 { // IPv4, TCP
		return 0, 0, false, false
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 || len(p) < ihl+14 {
		return 0, 0, false, false
	}
	t := p[ihl:]
	src, dst = uint16(t[0])<<8|uint16(t[1]), uint16(t[2])<<8|uint16(t[3])
	return src, dst, t[13]&0x01 != 0, true
}
