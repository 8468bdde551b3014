package main

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// plainEcho is a raw echo server for the tests that drive an external
// server (-addr): a goroutine per connection, which closes a connection
// silent for idle (0: never), queues all a peer does not read (no output
// limit) and takes every connection (no limit): a server whose faults the
// harness must find.
type plainEcho struct {
	ln   net.Listener
	idle time.Duration
	wg   sync.WaitGroup // the accept loop and every connection's goroutines
	// mu guards conns, the connections open, closed by stop.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startPlainEcho starts a plainEcho on 127.0.0.1 and returns its address;
// the test's cleanup stops it and waits for its goroutines.
func startPlainEcho(t *testing.T, idle time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &plainEcho{ln: ln, idle: idle, conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	t.Cleanup(s.stop)
	return ln.Addr().String()
}

func (s *plainEcho) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(c) })
	}
}

// serve echoes c's input through an unbounded queue: a reader that never
// waits for the writer.
func (s *plainEcho) serve(c net.Conn) {
	var mu sync.Mutex
	var queue [][]byte
	ready := make(chan struct{}, 1)
	done := make(chan struct{})
	s.wg.Go(func() { // the writer
		for {
			select {
			case <-ready:
			case <-done:
				return
			}
			mu.Lock()
			q := queue
			queue = nil
			mu.Unlock()
			for _, b := range q {
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		}
	})
	defer func() {
		close(done)
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	for {
		if s.idle > 0 {
			_ = c.SetReadDeadline(time.Now().Add(s.idle))
		}
		b := make([]byte, 16<<10)
		n, err := c.Read(b)
		if n > 0 {
			mu.Lock()
			queue = append(queue, b[:n])
			mu.Unlock()
			select {
			case ready <- struct{}{}:
			default:
			}
		}
		if err != nil { // the peer's close, or silent for idle
			return
		}
	}
}

func (s *plainEcho) stop() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
