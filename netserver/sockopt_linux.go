package netserver

import (
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT: the kernel aborts the connection when
// sent data stays unacknowledged this long.
func setUserTimeout(fd int, d time.Duration) error {
	return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
}

// bytesAcked reports how many bytes the peer has acknowledged on the socket
// (TCP_INFO's tcpi_bytes_acked, Linux 4.1 and later): progress that the
// kernel's send buffer hides from the outbound queue, which drains only
// when a good part of that buffer is free. One system call, one small
// allocation.
func bytesAcked(fd int) (uint64, bool) {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, false
	}
	return info.Bytes_acked, true
}
