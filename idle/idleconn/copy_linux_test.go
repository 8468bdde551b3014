package idleconn_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// procIO reads a counter of /proc/self/io: rchar (bytes the process read
// with read-like calls, which splice does not count) or syscw (its
// write-like calls, sendfile included, one per call).
func procIO(t *testing.T, key string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key+":"); ok {
			var n int64
			_, err := fmt.Sscan(v, &n)
			require.NoError(t, err)
			return n
		}
	}
	t.Skipf("no %s in /proc/self/io", key)
	return 0
}

// TestConn_CopySplices proves that io.Copy keeps the kernel's splice
// between TCP sockets through the wrapper, where Go splices without it: the
// bytes the process reads (rchar, which splice does not count) are only
// those its final reader reads, as with plain TCP, not twice as many as
// with a copy through Read and Write. The process-wide counter is read
// around each copy; nothing else in the package runs meanwhile.
func TestConn_CopySplices(t *testing.T) {
	const size = 8 << 20
	data := make([]byte, size)
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	t.Cleanup(w.Stop)

	// Each row copies size bytes from a source whose peer sends them into
	// a destination whose peer reads them, through Read (into rchar).
	measure := func(t *testing.T, wrapSrc, wrapDst bool, copyFn func(dst io.Writer, src io.Reader) error) int64 {
		t.Helper()
		var src io.Reader
		var srcPeer *net.TCPConn
		if wrapSrc {
			src, srcPeer = wrappedPair(t, w, only(idle.Config{IdleTimeout: 1 << 40}))
		} else {
			srcPeer, src = tcpPair(t)
		}
		var dst interface {
			io.Writer
			CloseWrite() error
		}
		var dstPeer *net.TCPConn
		if wrapDst {
			dst, dstPeer = wrappedPair(t, w, only(idle.Config{IdleTimeout: 1 << 40}))
		} else {
			dstPeer, dst = tcpPair(t)
		}
		before := procIO(t, "rchar")
		send(t, srcPeer, data)
		got := receive(readerOnlyConn{dstPeer}) // through Read: counted
		require.NoError(t, copyFn(dst, src))
		require.NoError(t, dst.CloseWrite())
		require.Len(t, waitBytes(t, got), size)
		return procIO(t, "rchar") - before
	}
	plainCopy := func(dst io.Writer, src io.Reader) error { _, err := io.Copy(dst, src); return err }

	baseline := measure(t, false, false, plainCopy)
	generic := measure(t, false, false, func(dst io.Writer, src io.Reader) error {
		_, err := io.Copy(struct{ io.Writer }{dst}, struct{ io.Reader }{src})
		return err
	})
	t.Logf("rchar: io.Copy(tcp, tcp) %d, through Read and Write %d, for %d bytes", baseline, generic, size)
	if baseline > size*5/4 || generic < size*2 {
		t.Skipf("this kernel's rchar does not tell splice from read: %d, %d", baseline, generic)
	}
	for _, tc := range []struct {
		name             string
		wrapSrc, wrapDst bool
		copy             func(dst io.Writer, src io.Reader) error
	}{
		{name: "io.Copy(tcp, wrapped)", wrapSrc: true, copy: plainCopy},
		{name: "io.Copy(wrapped, tcp)", wrapDst: true, copy: plainCopy},
		{name: "io.Copy(wrapped, wrapped)", wrapSrc: true, wrapDst: true, copy: plainCopy},
		{name: "io.CopyN(wrapped, tcp)", wrapDst: true, copy: func(dst io.Writer, src io.Reader) error {
			_, err := io.CopyN(dst, src, size)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := measure(t, tc.wrapSrc, tc.wrapDst, tc.copy)
			assert.Less(t, got, int64(size*5/4), "rchar %d: the copy read the bytes in user space", got)
		})
	}
}

// TestConn_CopySendfiles proves that io.Copy from a file keeps sendfile
// through the wrapper: the process makes a few write-like calls (syscw:
// sendfile calls, one per 256 KiB chunk or so), as without the wrapper,
// not one per 32 KiB as a copy through Read and Write does.
func TestConn_CopySendfiles(t *testing.T) {
	const size = 16 << 20
	path := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(path, make([]byte, size), 0o600))
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	t.Cleanup(w.Stop)

	measure := func(t *testing.T, wrap bool, copyFn func(dst io.Writer, src *os.File) error) int64 {
		t.Helper()
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		var dst interface {
			io.Writer
			CloseWrite() error
		}
		var peer *net.TCPConn
		if wrap {
			dst, peer = wrappedPair(t, w, only(idle.Config{IdleTimeout: 1 << 40}))
		} else {
			peer, dst = tcpPair(t)
		}
		got := receive(peer) // reads only: not in syscw
		before := procIO(t, "syscw")
		require.NoError(t, copyFn(dst, f))
		n := procIO(t, "syscw") - before
		require.NoError(t, dst.CloseWrite())
		require.Len(t, waitBytes(t, got), size)
		return n
	}
	plainCopy := func(dst io.Writer, src *os.File) error { _, err := io.Copy(dst, src); return err }

	baseline := measure(t, false, plainCopy)
	generic := measure(t, false, func(dst io.Writer, src *os.File) error {
		_, err := io.Copy(struct{ io.Writer }{dst}, struct{ io.Reader }{src})
		return err
	})
	t.Logf("syscw: io.Copy(tcp, file) %d, through Read and Write %d, for %d bytes", baseline, generic, size)
	require.Less(t, baseline, generic/2, "sendfile without the wrapper")
	got := measure(t, true, plainCopy)
	assert.Less(t, got, generic/2, "syscw %d: the copy wrote in 32 KiB writes", got)
}

// readerOnlyConn hides a conn's WriteTo, so that io.ReadAll-like readers
// read through Read.
type readerOnlyConn struct{ net.Conn }
