package netserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/panjf2000/gnet/v2/pkg/socket"
	"golang.org/x/sys/unix"
)

// perLoopListeners: on Linux every event loop listens on its own
// SO_REUSEPORT socket and accepts for itself. gnet then opens (and, past
// MaxConns, closes) each connection in the accept that took it, so a
// connection flood never holds more descriptors than MaxConns plus one per
// loop. With a single listener, gnet's acceptor loop takes connections as
// fast as the kernel queues them (up to the listen backlog, 4096 here, and
// more while the flood lasts) and hands them to the loops to open later; a
// flood then exhausts the descriptors, accept fails with EMFILE, and gnet
// stops the whole engine.
const perLoopListeners = true

// checkAddr binds a socket to addr as gnet will (SO_REUSEADDR, the same
// family), but without SO_REUSEPORT and without listening, and returns
// addr with the port the kernel gave it. It fails if another socket already
// listens on addr, even one in a SO_REUSEPORT group, so that the per-loop
// listeners do not silently join someone else's group; and it turns port 0
// into one free port that every loop's listener then binds.
func checkAddr(addr string) (string, error) {
	sa, family, tcpAddr, ipv6only, err := socket.GetTCPSockAddr("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("netserver: listen on %s: %w", addr, err)
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return "", fmt.Errorf("netserver: listen on %s: socket: %w", addr, err)
	}
	defer unix.Close(fd)
	if family == unix.AF_INET6 && ipv6only {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return "", fmt.Errorf("netserver: listen on %s: %w", addr, err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return "", fmt.Errorf("netserver: listen on %s: %w", addr, err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return "", fmt.Errorf("netserver: listen on %s: address already in use (set ReusePort to share it)", addr)
		}
		return "", fmt.Errorf("netserver: listen on %s: bind: %w", addr, err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return "", fmt.Errorf("netserver: listen on %s: %w", addr, err)
	}
	port := tcpAddr.Port
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		port = a.Port
	case *unix.SockaddrInet6:
		port = a.Port
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("netserver: listen on %s: %w", addr, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

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
		if port != want.Port {
			continue
		}
		if unspecified := want.IP == nil || want.IP.IsUnspecified(); unspecified != ip.IsUnspecified() ||
			!unspecified && !ip.Equal(want.IP) {
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
