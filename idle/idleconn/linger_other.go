//go:build !unix

package idleconn

import "net"

// lingerOff reports false: outside Unix the linger cannot be read, so a
// timeout's close sets every linger back to the default.
func lingerOff(net.Conn) bool { return false }
