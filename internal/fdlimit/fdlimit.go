// Package fdlimit derives a server's bound on open connections from the
// process's open-file limit, so that a flood of connections is refused one
// at a time instead of exhausting the descriptors the server needs to
// accept, close, log and be scraped. gnet's engine stops when an accept
// fails with EMFILE, taking every connection with it: a bound below the
// limit is what keeps one flood from hurting everyone else.
package fdlimit

import "math"

// The descriptors MaxConns leaves for what is not a connection.
const (
	// Reserve covers the standard streams, the listener, Go's own poller,
	// gnet's main reactor, log files, and a metrics listener with its
	// scrapes.
	Reserve = 64
	// PerLoop covers each gnet event loop's epoll descriptor and eventfd,
	// and its own listener under SO_REUSEPORT.
	PerLoop = 3
)

// MaxConns is the connection bound for an open-file limit of openFiles
// (RLIMIT_NOFILE's soft limit) with loops event loops: the limit less
// Reserve and PerLoop per loop, a fixed reserve rather than a share, since
// the other descriptors do not grow with the limit. Under a limit too small
// for the reserve it is half the limit, at least 1. It is 0 (no bound) when
// openFiles is 0 (unknown) or too large to bind anything (unlimited). A
// loops below 1 counts as 1. MaxConns is pure: O(1), no allocation.
func MaxConns(openFiles uint64, loops int) int {
	if openFiles == 0 || openFiles > math.MaxInt32 {
		return 0 // Linux's fs.nr_open is at most 2^30
	}
	n := int(openFiles)
	reserve := Reserve + PerLoop*max(loops, 1)
	if reserve > n/2 {
		return max(n/2, 1)
	}
	return n - reserve
}
