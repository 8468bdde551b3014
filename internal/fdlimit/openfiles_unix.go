//go:build unix

package fdlimit

import "golang.org/x/sys/unix"

// OpenFiles returns the process's open-file limit, RLIMIT_NOFILE's soft
// limit (which the Go runtime raises to about the hard limit at start), or
// 0 when it cannot be read or is RLIM_INFINITY.
func OpenFiles() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return 0
	}
	return uint64(lim.Cur)
}
