package main

import (
	"fmt"
	"math"
	"runtime"
)

// The descriptors -max-conns's default leaves for what is not a connection.
const (
	// fdReserve covers the standard streams, the listener, Go's own poller,
	// gnet's main reactor, log files, and the metrics listener with its
	// scrapes.
	fdReserve = 64
	// fdsPerLoop covers each gnet event loop's epoll descriptor and eventfd,
	// and its own listener under -reuse-port.
	fdsPerLoop = 3
)

// maxConnsFor is -max-conns's default under an open-file limit of openFiles
// (RLIMIT_NOFILE's soft limit) with loops event loops: the limit less
// fdReserve and fdsPerLoop per loop, so that a server full of connections
// can still accept and close them, log and be scraped instead of failing
// with EMFILE; a fixed reserve rather than a share, since the other
// descriptors do not grow with the limit. Under a limit too small for the
// reserve it is half the limit, at least 1. It is 0 (no bound) when
// openFiles is 0 (unknown) or too large to bind anything (unlimited).
// maxConnsFor is pure: O(1), no allocation.
func maxConnsFor(openFiles uint64, loops int) int {
	if openFiles == 0 || openFiles > math.MaxInt32 {
		return 0 // Linux's fs.nr_open is at most 2^30
	}
	n := int(openFiles)
	reserve := fdReserve + fdsPerLoop*max(loops, 1)
	if reserve > n/2 {
		return max(n/2, 1)
	}
	return n - reserve
}

// eventLoops is the number of event loops netserver runs for the
// EventLoops setting n, as netserver.Server.Start picks it: n, or
// GOMAXPROCS-1 and at least 1 when n is 0.
func eventLoops(n int) int {
	if n > 0 {
		return n
	}
	return max(1, runtime.GOMAXPROCS(0)-1)
}

// maxConnsHere describes, for the help, the -max-conns this process gets
// by default with the EventLoops setting loops.
func maxConnsHere(openFiles uint64, loops int) string {
	loops = eventLoops(loops)
	n := maxConnsFor(openFiles, loops)
	switch {
	case n == 0:
		return "Here: no limit,\nthe open-file limit being unknown or unlimited"
	case uint64(n) == openFiles/2 || n == 1:
		return fmt.Sprintf("Here: %d, half\nthe open-file limit %d", n, openFiles)
	}
	return fmt.Sprintf("Here:\n%d = %d - %d - %d×%d", n, openFiles, fdReserve, fdsPerLoop, loops)
}

// sizeText writes a byte count for the help: "4194304, 4 MiB".
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d, %d MiB", n, n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d, %d KiB", n, n>>10)
	}
	return fmt.Sprint(n)
}
