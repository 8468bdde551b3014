//go:build unix

package idleconn

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// lingerOff reports whether nc's socket is known not to wait in Close:
// SO_LINGER off, or on with a linger of 0. It reports false when it cannot
// tell (nc has no descriptor, or getsockopt fails). One getsockopt; called
// only by a timeout's close.
func lingerOff(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var l *unix.Linger
	var gerr error
	err = rc.Control(func(fd uintptr) {
		l, gerr = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER)
	})
	if err != nil || gerr != nil {
		return false
	}
	return l.Onoff == 0 || l.Linger == 0
}
