package idleconn

import (
	"io"
	"io/fs"
	"math"
	"net"
	"reflect"
	"syscall"
)

// copyChunkBytes bounds how many bytes ReadFrom and WriteTo hand the kernel
// at once: the Tracker learns of bytes moved by splice or sendfile once per
// chunk, so this is how much a copy may move between two activity marks,
// and how much one write-stall deadline covers.
const copyChunkBytes = 256 << 10

// ReadFrom copies from r into the connection until EOF, as io.ReaderFrom,
// and is what io.Copy(c, r) calls (net/http's response bodies too). It keeps
// the zero-copy paths that *net.TCPConn.ReadFrom takes, when the wrapped
// conn is a *net.TCPConn:
//
//   - from a regular file (an *os.File, or anything with Stat and
//     SyscallConn), sendfile, in chunks of 256 KiB; each marks activity once
//     written, and the write-stall deadline covers each chunk;
//   - on Linux, from a TCP or Unix stream connection (a *net.TCPConn, the
//     one io.Copy(c, tcpConn) passes, a *net.UnixConn, or another *Conn
//     around one), splice: ReadFrom waits until the source has bytes
//     queued, then splices what is queued (at most 256 KiB), so that the
//     write-stall deadline covers only the writing, never the wait for the
//     source, and activity is marked as each burst is written, even on a
//     connection that carries small messages far apart. A source *Conn has
//     its inbound bytes marked when they are seen queued.
//
// Any other source, or a wrapped conn other than a *net.TCPConn, is copied
// through Write, which marks each write as usual. r may be an
// *io.LimitedReader around any of these, as io.CopyN passes. After a
// timeout ReadFrom returns a *CloseError. Call it from the writer's
// goroutine, like Write.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	tc, ok := c.Conn.(*net.TCPConn)
	if !ok {
		return io.Copy(writerOnly{c}, r)
	}
	remain := int64(math.MaxInt64)
	lr, limited := r.(*io.LimitedReader)
	src := r
	if limited {
		if lr.N <= 0 {
			return 0, nil
		}
		remain, src = lr.N, lr.R
	}
	var from *Conn // a wrapped source, whose reads to mark
	if sc, ok := src.(*Conn); ok {
		from, src = sc, sc.Conn
	}
	var (
		n   int64
		err error
	)
	switch {
	case isRegularFile(src):
		n, err = c.readFromFile(tc, src, remain)
	case spliceCopy && isStreamSocket(src):
		rc, rerr := src.(syscall.Conn).SyscallConn()
		if rerr != nil {
			return io.Copy(writerOnly{c}, r)
		}
		n, err = c.readFromSocket(tc, src, rc, from, remain)
	default:
		return io.Copy(writerOnly{c}, r)
	}
	if limited {
		lr.N -= n
	}
	if err = c.wrapErr(err); from != nil {
		err = from.wrapErr(err)
	}
	return n, err
}

// readFromFile sends up to remain bytes of the regular file f in chunks.
func (c *Conn) readFromFile(tc *net.TCPConn, f io.Reader, remain int64) (int64, error) {
	var total int64
	for remain > 0 {
		chunk := min(remain, copyChunkBytes)
		n, err := c.writeChunk(tc, &io.LimitedReader{R: f, N: chunk})
		total += n
		remain -= n
		if err != nil || n < chunk { // an error, or the end of the file
			return total, err
		}
	}
	return total, nil
}

// readFromSocket splices up to remain bytes from the stream socket src,
// one burst of queued bytes at a time.
func (c *Conn) readFromSocket(tc *net.TCPConn, src io.Reader, rc syscall.RawConn, from *Conn, remain int64) (int64, error) {
	var total int64
	for remain > 0 {
		q, err := queued(rc)
		if err != nil || q == 0 { // an error, or EOF
			return total, err
		}
		if from != nil {
			from.t.Received()
		}
		chunk := min(remain, int64(q), copyChunkBytes)
		n, err := c.writeChunk(tc, &io.LimitedReader{R: src, N: chunk})
		total += n
		remain -= n
		if err != nil || n == 0 {
			return total, err
		}
	}
	return total, nil
}

// writeChunk hands one chunk to the wrapped conn's ReadFrom, which splices
// or sends it, and marks it as Write marks a write.
func (c *Conn) writeChunk(tc *net.TCPConn, chunk *io.LimitedReader) (int64, error) {
	if c.stall {
		c.t.Written()
	}
	n, err := tc.ReadFrom(chunk)
	if c.stall {
		c.t.Drained()
	}
	if n > 0 {
		c.t.Activity()
	}
	return n, err
}

// WriteTo copies from the connection into w until EOF, as io.WriterTo, and
// is what io.Copy(w, c) calls. On Linux, when the wrapped conn is a
// *net.TCPConn and w is a *net.TCPConn, an *os.File or another *Conn, it
// keeps the splice that io.Copy would do without the wrapper: it waits
// until bytes are queued on the connection, marks them as inbound bytes and
// activity, and lets w splice what is queued (at most 256 KiB at once). A
// copy thus never waits inside a splice for bytes that have not arrived,
// and each burst is marked when it arrives. Otherwise it copies through
// Read, which marks each read as usual. After a timeout WriteTo returns a
// *CloseError. Call it from the reader's goroutine, like Read.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	tc, ok := c.Conn.(*net.TCPConn)
	if !ok || !spliceCopy || !isSpliceDest(w) {
		return io.Copy(w, readerOnly{c})
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return io.Copy(w, readerOnly{c})
	}
	dst := w.(io.ReaderFrom)
	var total int64
	for {
		q, err := queued(rc)
		if err != nil || q == 0 { // an error, or EOF
			return total, c.wrapErr(err)
		}
		c.t.Received()
		n, err := dst.ReadFrom(&io.LimitedReader{R: tc, N: min(int64(q), copyChunkBytes)})
		total += n
		if err != nil || n == 0 {
			return total, c.wrapErr(err)
		}
	}
}

// writerOnly hides a Conn's ReadFrom from io.Copy, and readerOnly its
// WriteTo, so that the generic copies do not recurse.
type (
	writerOnly struct{ io.Writer }
	readerOnly struct{ io.Reader }
)

// isRegularFile reports whether r is a regular file that sendfile can read
// from: it has a descriptor and Stat says so (an *os.File, or the wrapper
// os.File.WriteTo passes to io.Copy).
func isRegularFile(r io.Reader) bool {
	f, ok := r.(interface {
		syscall.Conn
		Stat() (fs.FileInfo, error)
	})
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular()
}

// isStreamSocket reports whether r is a connection that
// *net.TCPConn.ReadFrom splices from: a *net.TCPConn, a *net.UnixConn of
// network "unix", or the *net.TCPConn without WriteTo that
// net.TCPConn.WriteTo passes to io.Copy, an unexported type of package net
// recognized by name (if it is renamed, the copy is still correct, only
// slower; TestConn_CopySplices notices).
func isStreamSocket(r io.Reader) bool {
	switch v := r.(type) {
	case *net.TCPConn:
		return true
	case *net.UnixConn:
		a := v.LocalAddr()
		if a == nil {
			a = v.RemoteAddr()
		}
		return a != nil && a.Network() == "unix"
	}
	t := reflect.TypeOf(r)
	return t.PkgPath() == "net" && t.Name() == "tcpConnWithoutWriteTo"
}

// isSpliceDest reports whether w's ReadFrom splices from a
// *net.TCPConn.
func isSpliceDest(w io.Writer) bool {
	switch w.(type) {
	case *net.TCPConn, *Conn:
		return true
	case interface {
		io.ReaderFrom
		syscall.Conn
		Stat() (fs.FileInfo, error)
	}: // an *os.File
		return true
	}
	return false
}
