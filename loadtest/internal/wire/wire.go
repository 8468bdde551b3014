// Package wire timestamps the FIN segments a server sends on the loopback
// interface, as the kernel saw them pass, so that the harness can tell
// when a server closed a connection without counting its own scheduling
// delay to read the close. Linux only; it needs CAP_NET_RAW.
package wire

import (
	"errors"
	"sync"
	"time"
)

// ErrUnsupported: no capture on this system, or not the privilege to open
// one; errors.Is works on the error Open returns.
var ErrUnsupported = errors.New("wire: capture unsupported here")

// Capture records the first FIN the server at port sent to each local
// (client) port. Its methods may be called from any goroutine.
//
// Ownership: fins is guarded by mu; arrived is broadcast under mu after
// each new entry.
type Capture struct {
	port uint16

	mu      sync.Mutex
	arrived *sync.Cond
	fins    map[uint16]time.Time // client port -> the server's first FIN to it
	closed  bool

	stop func() // ends the reader and waits for it
}

func newCapture(port uint16) *Capture {
	c := &Capture{port: port, fins: map[uint16]time.Time{}}
	c.arrived = sync.NewCond(&c.mu)
	return c
}

// record notes a FIN from the server to client port at t; a later FIN to
// the same port (a port reused by a new connection) replaces it once taken.
func (c *Capture) record(client uint16, t time.Time) {
	c.mu.Lock()
	if _, ok := c.fins[client]; !ok {
		c.fins[client] = t
		c.arrived.Broadcast()
	}
	c.mu.Unlock()
}

// Take returns, and forgets, when the server's FIN to client port left,
// waiting up to timeout for the capture to read it; ok is false if none
// came (or the capture was closed).
func (c *Capture) Take(client uint16, timeout time.Duration) (t time.Time, ok bool) {
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() { c.mu.Lock(); c.arrived.Broadcast(); c.mu.Unlock() })
	defer wake.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if t, ok = c.fins[client]; ok {
			delete(c.fins, client)
			return t, true
		}
		if c.closed || !time.Now().Before(deadline) {
			return time.Time{}, false
		}
		c.arrived.Wait()
	}
}

// Close stops the capture and waits for its goroutine.
func (c *Capture) Close() {
	c.stop()
	c.mu.Lock()
	c.closed = true
	c.arrived.Broadcast()
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
