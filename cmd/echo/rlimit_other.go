//go:build !unix

package main

// openFileLimit returns 0 (unknown): this system has no RLIMIT_NOFILE, so
// -max-conns has no default bound.
func openFileLimit() uint64 { return 0 }
