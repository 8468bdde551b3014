package netserver

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// listenerID names a listening socket: its descriptor, and the socket's
// inode, which tells it from a later socket given the same descriptor.
type listenerID struct {
	fd  int
	ino uint64
}

// findListeners returns this process's listening TCP sockets bound to addr:
// gnet's listener, or with SO_REUSEPORT one per event loop. gnet does not
// expose them, so they are found in /proc/self/fd by what they are (a
// socket that accepts) and where they are bound.
func findListeners(addr net.Addr) ([]listenerID, error) {
	want, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("netserver: listener address %v is not TCP", addr)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("netserver: find listeners: %w", err)
	}
	var ids []listenerID
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || n == 0 {
			continue // not a socket (ENOTSOCK), or not listening
		}
		if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		var ip net.IP
		var port int
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			ip, port = net.IP(a.Addr[:]), a.Port
		case *unix.SockaddrInet6:
			ip, port = net.IP(a.Addr[:]), a.Port
		default:
			continue
		}
		if port != want.Port || !ip.Equal(want.IP) {
			continue
		}
		if ino, ok := inode(fd); ok {
			ids = append(ids, listenerID{fd: fd, ino: ino})
		}
	}
	return ids, nil
}

func inode(fd int) (uint64, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}

// retireListener closes the listening socket at fd while keeping fd itself
// open: it puts in its place a listening Unix socket with an unreachable
// autobound name. The TCP socket's last reference goes, so the kernel
// removes it from its SO_REUSEPORT group (the group's other sockets take
// new connections) or refuses new connections (a peer sees a reset), and
// removes it from gnet's epoll set. gnet's accept on fd, should an event
// already collected reach it, finds nothing (EAGAIN) instead of an error
// that would stop the engine; gnet closes fd when the engine stops.
func retireListener(id listenerID) error {
	if ino, ok := inode(id.fd); !ok || ino != id.ino {
		return fmt.Errorf("netserver: retire listener: descriptor %d is no longer the listener", id.fd)
	}
	ph, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netserver: retire listener: socket: %w", err)
	}
	defer unix.Close(ph)
	if err := unix.Bind(ph, &unix.SockaddrUnix{}); err != nil { // an empty name autobinds
		return fmt.Errorf("netserver: retire listener: bind: %w", err)
	}
	if err := unix.Listen(ph, 1); err != nil {
		return fmt.Errorf("netserver: retire listener: listen: %w", err)
	}
	if err := unix.Dup3(ph, id.fd, unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("netserver: retire listener: dup3: %w", err)
	}
	return nil
}
