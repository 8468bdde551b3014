package testnet

import (
	"net"
	"sync"
	"testing"
)

// Serve runs a test server on 127.0.0.1 that hands each connection it
// accepts, and the connection's accept index, to handle on a goroutine of
// its own, and closes the connection when handle returns. The test's
// cleanup closes the listener and every connection still open, and waits
// for the goroutines. It returns the server's address.
func Serve(t testing.TB, handle func(c net.Conn, i uint64)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testnet: listen: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for i := uint64(0); ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					c.Close()
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				handle(c, i)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
