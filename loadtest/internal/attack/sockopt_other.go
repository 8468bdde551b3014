//go:build !unix

package attack

import "syscall"

// rcvBufControl sets nothing where the socket cannot be reached before it
// connects: the receive buffer stays the system's default.
func rcvBufControl(int) func(network, address string, c syscall.RawConn) error {
	return nil
}
