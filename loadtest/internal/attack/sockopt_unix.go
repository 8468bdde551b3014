//go:build unix

package attack

import "syscall"

// rcvBufControl returns a net.Dialer Control function that sets the
// socket's receive buffer (SO_RCVBUF; Linux doubles it and keeps a floor)
// before it connects, so the window advertised in the handshake is small.
func rcvBufControl(n int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}); err != nil {
			return err
		}
		return serr
	}
}
