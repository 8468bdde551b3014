//go:build !unix

package fdlimit

// OpenFiles returns 0 (unknown): this system has no RLIMIT_NOFILE.
func OpenFiles() uint64 { return 0 }
