package idleconn

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// spliceCopy says whether ReadFrom and WriteTo splice between sockets.
const spliceCopy = true

// queued waits until the stream socket behind rc has bytes to read, or is
// at EOF, and returns how many bytes are queued: 0 at EOF. It returns the
// error that ended the wait (a deadline, a close) or that reading would
// report (a reset). Waiting goes through the runtime's poller, as a Read
// does, and honours the read deadline.
func queued(rc syscall.RawConn) (int, error) {
	var (
		n     int
		opErr error
	)
	err := rc.Read(func(fd uintptr) bool {
		for {
			q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
			if err != nil {
				opErr = os.NewSyscallError("ioctl", err)
				return true
			}
			if q > 0 {
				n = q
				return true
			}
			// Nothing queued: EOF, an error, or nothing yet.
			var b [1]byte
			m, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case err == unix.EAGAIN:
				return false // wait until readable
			case err == unix.EINTR, m > 0: // bytes arrived since the ioctl
				continue
			case err != nil:
				opErr = os.NewSyscallError("recvfrom", err)
			}
			return true // EOF, or the error
		}
	})
	if err != nil {
		return 0, err
	}
	return n, opErr
}
