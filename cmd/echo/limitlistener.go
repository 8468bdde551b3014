package main

import (
	"net"
	"sync"
)

// limitListener is a net.Listener with at most cap(slots) of its
// connections open at once: Accept waits for one to close before it takes
// another, leaving the rest in the kernel's accept queue, where they hold
// no descriptor of the process. It keeps the metrics server within the
// descriptors -max-conns leaves it. Its methods may be called from any
// goroutine.
type limitListener struct {
	net.Listener
	slots     chan struct{} // one element per open connection
	done      chan struct{} // closed by Close, to end a waiting Accept
	closeOnce sync.Once
}

// newLimitListener returns ln limited to n open connections (n >= 1).
func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free place, then for a connection. After Close it
// returns net.ErrClosed.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
}

// Close closes the listener and ends any Accept waiting for a place.
// Connections already accepted stay open.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its place back on its first Close.
type limitConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
