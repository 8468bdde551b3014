//go:build !linux

package netserver

import "time"

// setUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist.
func setUserTimeout(int, time.Duration) error { return nil }

// bytesAcked is Linux-only: elsewhere progress is what leaves the outbound
// queue.
func bytesAcked(int) (uint64, bool) { return 0, false }
