package main

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/netwheel/netwheel/internal/testnet"
)

// startPlainEcho starts a raw echo server on 127.0.0.1 for the tests that
// drive an external server (-addr), and returns its address: a goroutine
// per connection (testnet.Serve), which closes a connection silent for idle
// (0: never), queues all a peer does not read (no output limit) and takes
// every connection (no limit): a server whose faults the harness must find.
func startPlainEcho(t *testing.T, idle time.Duration) string {
	return testnet.Serve(t, func(c net.Conn, _ uint64) { plainEcho(c, idle) })
}

// plainEcho echoes c's input through an unbounded queue: a reader that never
// waits for the writer. It returns once both have ended.
func plainEcho(c net.Conn, idle time.Duration) {
	var mu sync.Mutex
	var queue [][]byte
	ready := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the writer
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
		c.Close() // ends a write the peer does not read
		wg.Wait()
	}()
	for {
		if idle > 0 {
			_ = c.SetReadDeadline(time.Now().Add(idle))
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
