// Package fincap timestamps the FIN segments a server sends on the loopback
// interface, as the kernel saw them pass, so that the harness can tell
// when a server closed a connection without counting its own scheduling
// delay to read the close. Linux only; it needs CAP_NET_RAW.
package fincap

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// ErrUnsupported: no capture on this system, or not the privilege to open
// one; errors.Is works on the error Open returns.
var ErrUnsupported = errors.New("fincap: capture unsupported here")

// Capture records the FINs the server at port sent, by the client's
// address and port. Its methods may be called from any goroutine.
//
// Ownership: fins, waiting and closed are guarded by mu.
type Capture struct {
	port uint16

	mu      sync.Mutex
	fins    map[Client]time.Time     // the server's latest FIN to each client, not yet taken
	waiting map[Client]chan struct{} // closed when a FIN to that client is recorded
	closed  bool

	stop func() // ends the reader and waits for it
}

// Client is a client's end of a connection: its IPv4 address and port.
type Client struct {
	IP   [4]byte
	Port uint16
}

// retransmitWindow: a FIN to a client within this of the one recorded is
// the same close retransmitted, not a new connection's.
const retransmitWindow = 200 * time.Millisecond

func newCapture(port uint16) *Capture {
	return &Capture{port: port, fins: map[Client]time.Time{}, waiting: map[Client]chan struct{}{}}
}

// record notes a FIN from the server to cl at t. It replaces an earlier
// one unless t is within retransmitWindow of it: a port reused by a later
// connection gets that connection's FIN.
func (c *Capture) record(cl Client, t time.Time) {
	c.mu.Lock()
	if old, ok := c.fins[cl]; !ok || t.Sub(old) > retransmitWindow {
		c.fins[cl] = t
		if w, ok := c.waiting[cl]; ok {
			close(w)
			delete(c.waiting, cl)
		}
	}
	c.mu.Unlock()
}

// Take returns, and forgets, when the server's FIN to cl passed, if that
// was not before notBefore (the connection's open: an older FIN closed an
// earlier connection from the same port), waiting up to timeout for the
// capture to read it; ok is false if none came. One caller at a time per
// client.
func (c *Capture) Take(cl Client, notBefore time.Time, timeout time.Duration) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.fins[cl]; (!ok || t.Before(notBefore)) && !c.closed {
		w := make(chan struct{})
		c.waiting[cl] = w
		c.mu.Unlock()
		tm := time.NewTimer(timeout)
		select {
		case <-w:
		case <-tm.C:
		}
		tm.Stop()
		c.mu.Lock()
		if c.waiting[cl] == w {
			delete(c.waiting, cl)
		}
	}
	t, ok := c.fins[cl]
	delete(c.fins, cl)
	return t, ok && !t.Before(notBefore)
}

// Close stops the capture and waits for its goroutine; waiting Takes
// return at once.
func (c *Capture) Close() {
	c.stop()
	c.mu.Lock()
	c.closed = true
	for cl, w := range c.waiting {
		close(w)
		delete(c.waiting, cl)
	}
	c.mu.Unlock()
}

// parse reads an IPv4 packet p (no link header) and reports its source
// port, its destination, and whether it carries FIN.
func parse(p []byte) (src uint16, dst Client, fin, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != 6 { // IPv4, TCP
		return 0, Client{}, false, false
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 || len(p) < ihl+14 {
		return 0, Client{}, false, false
	}
	t := p[ihl:]
	dst = Client{IP: [4]byte(p[16:20]), Port: uint16(t[2])<<8 | uint16(t[3])}
	return uint16(t[0])<<8 | uint16(t[1]), dst, t[13]&0x01 != 0, true
}

// OpenLoopback starts the capture of the FINs the server at target sends on
// the loopback; without the privilege or a loopback target it returns a
// note saying why there is none.
func OpenLoopback(target string) (*Capture, string, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, "", fmt.Errorf("fincap: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return nil, "-fins: not done: the server is not at an IPv4 loopback address", nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, "", fmt.Errorf("fincap: port %q: %w", port, err)
	}
	c, err := Open(uint16(n))
	if err != nil { // best effort: a note, not a failed run
		return nil, "-fins: not done: " + err.Error(), nil
	}
	return c, "", nil
}
