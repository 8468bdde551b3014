package fincap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Open starts capturing the FINs the server at port sends on the loopback
// interface. It fails with an error wrapping ErrUnsupported without
// CAP_NET_RAW.
func Open(port uint16) (*Capture, error) {
	lo, err := loopback()
	if err != nil {
		return nil, err
	}
	// SOCK_DGRAM: the kernel strips the link header, so packets start at
	// the IP header.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return nil, fmt.Errorf("%w: a packet socket needs CAP_NET_RAW: %v", ErrUnsupported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: packet socket: %v", ErrUnsupported, err)
	}
	// Any failure from here is a system that cannot capture so (a
	// sandbox without socket filters, say): unsupported too.
	fail := func(what string, err error) (*Capture, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s: %v", ErrUnsupported, what, err)
	}
	// In the kernel, keep only TCP segments with FIN from the server's
	// port (offsets from the IP header), so that a busy loopback does not
	// fill the socket with what the capture drops anyway.
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 9},                    // 0: protocol
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 6, K: 6},            // 1: TCP, else drop
		{Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 0},                   // 2: X = IP header length
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_IND, K: 0},                    // 3: source port
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 3, K: uint32(port)}, // 4: the server's, else drop
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_IND, K: 13},                   // 5: TCP flags
		{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jf: 1, K: 0x01},        // 6: FIN, else drop
		{Code: unix.BPF_RET | unix.BPF_K, K: 128},                                // 7: keep the headers
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},                                  // 8: drop
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}); err != nil {
		return fail("SO_ATTACH_FILTER", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	// Room for a burst of FINs: beyond rmem_max where privileged.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}); err != nil {
		return fail("SO_RCVTIMEO", err)
	}
	// A socket bound to one protocol sees loopback packets once, as they
	// arrive (PACKET_HOST), stamped when the loopback device received them
	// from the sender, in the sender's send call.
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: lo}); err != nil {
		return fail("bind to lo", err)
	}
	c := newCapture(port)
	var wg sync.WaitGroup
	var done sync.Once
	quit := make(chan struct{})
	wg.Go(func() { c.read(fd, quit) })
	c.stop = func() {
		done.Do(func() {
			close(quit)
			wg.Wait()
			unix.Close(fd)
		})
	}
	return c, nil
}

func (c *Capture) read(fd int, quit <-chan struct{}) {
	buf := make([]byte, 128) // headers are enough; the rest is truncated
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
	for {
		select {
		case <-quit:
			return
		default:
		}
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			continue // the receive timeout, so that quit is seen
		}
		src, dst, fin, ok := parse(buf[:n])
		if !ok || !fin || src != c.port {
			continue
		}
		if t, ok := stamp(oob[:oobn]); ok {
			c.record(dst, t)
		}
	}
}

// stamp returns the kernel's receive timestamp among control messages.
func stamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), true
		}
	}
	return time.Time{}, false
}

func loopback() (int, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, fmt.Errorf("fincap: interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Index, nil
		}
	}
	return 0, fmt.Errorf("%w: no loopback interface", ErrUnsupported)
}

// htons returns v in network byte order, as a number in this machine's.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
