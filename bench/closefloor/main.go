//go:build unix

// Command closefloor measures how fast this machine can close loopback TCP
// connections, with no server framework and no timer: the floor under any
// server's close delay when many connections are due at the same instant.
//
// It opens -conns connection pairs on 127.0.0.1, parks a client goroutine in
// Read on each (as the load-test harness does), then closes every server
// end in a tight loop on -threads locked OS threads and reports how long
// the closes took, per close, and when the close call of the connection at
// the 99th percentile was made. If N connections fall due together, a
// server whose loop does nothing but close them cannot close the 99th
// percentile one sooner than that.
//
//	cd bench && go run ./closefloor -conns 8000 -rounds 5
//
// Each round holds 2 x conns descriptors; keep conns under half the
// process's open-file limit.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
)

func main() {
	conns := flag.Int("conns", 8000, "connections closed together")
	rounds := flag.Int("rounds", 3, "rounds")
	threads := flag.Int("threads", 1, "threads sharing the closes")
	rst := flag.Bool("rst", false, "close with SO_LINGER 0 (reset) instead of FIN")
	flag.Parse()
	if *conns < 100 || *threads < 1 || *threads > *conns || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "closefloor: need -conns >= 100, 1 <= -threads <= -conns, -rounds >= 1")
		os.Exit(2)
	}
	for r := 1; r <= *rounds; r++ {
		res, err := round(*conns, *threads, *rst)
		if err != nil {
			fmt.Fprintln(os.Stderr, "closefloor:", err)
			os.Exit(1)
		}
		fmt.Printf("round %d: %d closes on %d thread(s)%s took %v, %.1f µs per close per thread; close call of the p99 connection %v after the first; clients saw EOF p50 %v, p99 %v\n",
			r, *conns, *threads, map[bool]string{true: " (reset)"}[*rst], res.total.Round(time.Microsecond),
			float64(res.total.Nanoseconds())/1e3/float64(*conns)*float64(*threads),
			res.p99Call.Round(time.Microsecond), res.eofP50.Round(time.Microsecond), res.eofP99.Round(time.Microsecond))
	}
}

type result struct {
	total, p99Call, eofP50, eofP99 time.Duration
}

func round(n, threads int, rst bool) (result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	defer ln.Close()
	// Accept on the side, keeping a duplicate of each descriptor outside
	// the runtime's poller, so that closing it is the bare system call.
	fds := make([]int, 0, n)
	accepted := make(chan error, 1)
	go func() {
		for len(fds) < n {
			c, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			rc, err := c.(*net.TCPConn).SyscallConn()
			if err != nil {
				accepted <- err
				return
			}
			var dupErr error
			if err := rc.Control(func(fd uintptr) {
				var nfd int
				nfd, dupErr = syscall.Dup(int(fd))
				fds = append(fds, nfd)
			}); err != nil || dupErr != nil {
				accepted <- errors.Join(err, dupErr)
				return
			}
			c.Close()
		}
		accepted <- nil
	}()
	clients := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return result{}, fmt.Errorf("dial: %w (%d connections open)", err, len(clients))
		}
		clients = append(clients, c)
	}
	if err := <-accepted; err != nil {
		return result{}, err
	}
	if rst {
		for _, fd := range fds {
			if err := syscall.SetsockoptLinger(fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1}); err != nil {
				return result{}, err
			}
		}
	}
	eof := make([]time.Time, n)
	var readers sync.WaitGroup
	for i, c := range clients {
		readers.Go(func() {
			_, _ = io.Copy(io.Discard, c)
			eof[i] = time.Now()
		})
	}
	time.Sleep(200 * time.Millisecond) // let every reader park

	calls := make([]time.Duration, n)
	var closers sync.WaitGroup
	start := time.Now()
	per := (n + threads - 1) / threads
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		closers.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for i := lo; i < hi; i++ {
				_ = syscall.Close(fds[i])
				calls[i] = time.Since(start)
			}
		})
	}
	closers.Wait()
	total := time.Since(start)
	readers.Wait()

	slices.Sort(calls)
	seen := make([]time.Duration, n)
	for i, t := range eof {
		seen[i] = t.Sub(start)
	}
	slices.Sort(seen)
	return result{total: total, p99Call: calls[n*99/100], eofP50: seen[n/2], eofP99: seen[n*99/100]}, nil
}
