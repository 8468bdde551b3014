package idleconn_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/idle/idleconn"
	"github.com/netwheel/netwheel/wheel"
)

// tcpPair returns the two ends of a TCP connection on 127.0.0.1.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// wrappedPair returns a TCP connection whose server end is wrapped with cfg
// on w, and its client end.
func wrappedPair(t *testing.T, w *wheel.Wheel, cfg idle.Config) (*idleconn.Conn, *net.TCPConn) {
	t.Helper()
	client, server := tcpPair(t)
	c, err := idleconn.WrapConn(server, w, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, client
}

// payload returns n random bytes.
func payload(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(b)
	return b
}

// send writes data to c and shuts down its writing side, in the background.
func send(t *testing.T, c *net.TCPConn, data []byte) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	t.Cleanup(func() { assert.NoError(t, waitErr(t, errc)) })
}

// receive reads c to EOF in the background; the channel yields what it read.
func receive(c net.Conn) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		ch <- b
	}()
	return ch
}

func waitBytes(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("copy did not finish")
		return nil
	}
}

// TestConn_CopyMarks copies through ReadFrom and WriteTo in every shape
// io.Copy and io.CopyN take, with sockets and files at the other end: the
// bytes arrive intact, and the wrapped connections record the copy (inbound
// bytes on a source, activity on both ends) at the instant it happened. On
// Linux these copies splice or sendfile (TestConn_CopySplices proves it for
// sockets); elsewhere some go through Read and Write.
func TestConn_CopyMarks(t *testing.T) {
	const size = 1<<20 + 12345 // several chunks and a remainder
	const at = 5 * time.Second // the clock when the copy runs
	data := payload(size)
	dir := t.TempDir()
	path := filepath.Join(dir, "data")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	const (
		wrapped = "wrapped"
		tcp     = "tcp"
		file    = "file"
	)
	for _, tc := range []struct {
		name     string
		from, to string
		n        int64 // for io.CopyN; 0: io.Copy
	}{
		{name: "io.Copy(tcp, wrapped)", from: wrapped, to: tcp},
		{name: "io.Copy(wrapped, tcp)", from: tcp, to: wrapped},
		{name: "io.Copy(wrapped, wrapped)", from: wrapped, to: wrapped},
		{name: "io.CopyN(wrapped, tcp)", from: tcp, to: wrapped, n: size - 1000},
		{name: "io.CopyN(wrapped, wrapped)", from: wrapped, to: wrapped, n: size - 1000},
		{name: "io.CopyN(tcp, wrapped)", from: wrapped, to: tcp, n: size - 1000},
		{name: "io.Copy(wrapped, file)", from: file, to: wrapped},
		{name: "io.CopyN(wrapped, file)", from: file, to: wrapped, n: size - 1000},
		{name: "io.Copy(file, wrapped)", from: wrapped, to: file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := wheel.NewManualClock()
			w := wheel.New(wheel.WithClock(clk))
			t.Cleanup(w.Stop)
			var (
				src    io.Reader
				dst    io.Writer
				closeW func() error  // ends what dst's reader reads
				got    <-chan []byte // what dst's reader read
			)
			var wsrc, wdst *idleconn.Conn
			switch tc.from {
			case wrapped:
				c, peer := wrappedPair(t, w, only(idle.Config{}))
				send(t, peer, data)
				src, wsrc = c, c
			case tcp:
				peer, c := tcpPair(t)
				send(t, peer, data)
				src = c
			case file:
				f, err := os.Open(path)
				require.NoError(t, err)
				t.Cleanup(func() { f.Close() })
				src = f
			}
			switch tc.to {
			case wrapped:
				c, peer := wrappedPair(t, w, only(idle.Config{}))
				dst, wdst, closeW, got = c, c, c.CloseWrite, receive(peer)
			case tcp:
				peer, c := tcpPair(t)
				dst, closeW, got = c, c.CloseWrite, receive(peer)
			case file:
				f, err := os.Create(filepath.Join(dir, "copy"))
				require.NoError(t, err)
				t.Cleanup(func() { f.Close() })
				ch := make(chan []byte, 1)
				dst, got = f, ch
				closeW = func() error {
					b, err := os.ReadFile(f.Name())
					ch <- b
					return err
				}
			}

			clk.Advance(at)
			var n int64
			var err error
			if tc.n == 0 {
				n, err = io.Copy(dst, src)
			} else {
				n, err = io.CopyN(dst, src, tc.n)
			}
			require.NoError(t, err)
			want := int64(size)
			if tc.n != 0 {
				want = tc.n
			}
			require.Equal(t, want, n)
			require.NoError(t, closeW())
			require.True(t, bytes.Equal(data[:want], waitBytes(t, got)), "bytes differ")

			if wsrc != nil {
				assert.Equal(t, at, wsrc.LastIn(), "source: inbound bytes")
				assert.Equal(t, at, wsrc.LastActivity(), "source: activity")
			}
			if wdst != nil {
				assert.Equal(t, at, wdst.LastActivity(), "destination: activity")
				assert.Zero(t, wdst.LastIn(), "destination: no inbound bytes")
			}
		})
	}
}

// TestConn_CopyFromQuietSource proxies a source that sends a message now
// and then into a wrapped connection: waiting for the source is neither a
// write stall nor activity, and each message marks activity when it is
// written, so the connection closes only once it has been idle.
func TestConn_CopyFromQuietSource(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	t.Cleanup(w.Stop)
	dst, dstPeer := wrappedPair(t, w, only(idle.Config{IdleTimeout: 10 * time.Second, WriteStallTimeout: 2 * time.Second}))
	srcPeer, src := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(dst, src) // src.WriteTo(dst): dst.ReadFrom
		done <- err
	}()
	msg := []byte("message")
	buf := make([]byte, len(msg))
	for range 3 {
		clk.Advance(9 * time.Second) // the source is quiet
		require.Equal(t, idle.ReasonNone, dst.Tracker().Reason())
		require.False(t, dst.WriteArmed(), "waiting for the source is not a stalled write")
		_, err := srcPeer.Write(msg)
		require.NoError(t, err)
		_, err = io.ReadFull(dstPeer, buf)
		require.NoError(t, err)
		require.Equal(t, msg, buf)
		now := clk.Now()
		require.Eventually(t, func() bool { return dst.LastActivity() == now },
			10*time.Second, time.Millisecond, "the message marks activity")
	}
	clk.Advance(10 * time.Second)
	require.Equal(t, idle.ReasonIdle, dst.Tracker().Reason())
	// The copy waits on its source, as without the wrapper; the next
	// message finds the destination closed.
	_, err := srcPeer.Write(msg)
	require.NoError(t, err)
	err = waitErr(t, done)
	require.ErrorIs(t, err, idle.ReasonIdle)
	var ce *idleconn.CloseError
	require.ErrorAs(t, err, &ce)
	assert.True(t, ce.Timeout())
}

// TestConn_CopyToQuietPeer copies from a wrapped connection whose peer
// sends a message now and then: each message marks inbound bytes when it
// arrives, and the read-silence timeout closes the connection, ending the
// copy, once the peer falls silent.
func TestConn_CopyToQuietPeer(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	t.Cleanup(w.Stop)
	src, srcPeer := wrappedPair(t, w, only(idle.Config{ReadSilenceTimeout: 10 * time.Second}))
	dstPeer, dst := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(dst, src) // src.WriteTo(dst)
		done <- err
	}()
	msg := []byte("message")
	buf := make([]byte, len(msg))
	for range 3 {
		clk.Advance(9 * time.Second)
		require.Equal(t, idle.ReasonNone, src.Tracker().Reason())
		_, err := srcPeer.Write(msg)
		require.NoError(t, err)
		_, err = io.ReadFull(dstPeer, buf)
		require.NoError(t, err)
		now := clk.Now()
		require.Eventually(t, func() bool { return src.LastIn() == now },
			10*time.Second, time.Millisecond, "the message marks inbound bytes")
	}
	clk.Advance(10 * time.Second)
	err := waitErr(t, done)
	require.ErrorIs(t, err, idle.ReasonDeadPeer)
	assert.ErrorIs(t, err, net.ErrClosed)
}

// TestConn_CopyWriteStall copies into a wrapped connection whose peer does
// not read: the write-stall timeout closes it and ends the copy.
func TestConn_CopyWriteStall(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	t.Cleanup(w.Stop)
	dst, _ := wrappedPair(t, w, only(idle.Config{WriteStallTimeout: 5 * time.Second}))
	srcPeer, src := tcpPair(t)
	go func() { _, _ = srcPeer.Write(make([]byte, 256<<20)) }() // ends when srcPeer is closed
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(dst, src)
		done <- err
	}()
	// Step the clock until the socket buffers are full and a chunk stalls.
	require.Eventually(t, func() bool {
		clk.Advance(time.Second)
		return dst.Tracker().Reason() != idle.ReasonNone
	}, 10*time.Second, time.Millisecond)
	err := waitErr(t, done)
	require.ErrorIs(t, err, idle.ReasonWriteStall)
	var ne net.Error
	require.True(t, errors.As(err, &ne))
	assert.True(t, ne.Timeout())
}
