package frame_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// echoOrClose echoes every message but "bye", which it answers by closing
// with an application code.
type echoOrClose struct{ netserver.Echo }

func (h echoOrClose) OnMessage(c *netserver.Conn, msg []byte) {
	if string(msg) == "bye" {
		c.CloseCode(4001, "as asked")
		return
	}
	h.Echo.OnMessage(c, msg)
}

// startFramed starts a Framed netserver on 127.0.0.1:0 that probes a
// silent peer after 50ms and closes it 100ms after an unanswered probe.
func startFramed(t *testing.T) *netserver.Server {
	t.Helper()
	srv, err := netserver.New(netserver.Config{
		Addr: "127.0.0.1:0", Protocol: netserver.Framed, EventLoops: 1,
		Timeouts: idle.Config{KeepaliveTime: 50 * time.Millisecond, KeepaliveTimeout: 100 * time.Millisecond},
	}, echoOrClose{})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// dial returns the frame.Conn, every reply on, of a testpeer dialed to srv.
func dial(t *testing.T, srv *netserver.Server) *frame.Conn {
	t.Helper()
	p, err := testpeer.Dial(t, srv.Addr().String(), 0)
	require.NoError(t, err)
	require.NoError(t, p.SetDeadline(time.Now().Add(5*time.Second)))
	p.Frames.SetReplies(frame.ReplyAll)
	return p.Frames
}

// nextOf reads frames until one of type typ, and returns it.
func nextOf(t *testing.T, c *frame.Conn, typ frame.Type) frame.Frame {
	t.Helper()
	for {
		f, err := c.Next()
		require.NoError(t, err, "waiting for %s", typ)
		if f.Type == typ {
			return f
		}
	}
}

// Conn against a real netserver: the echo comes back and is stamped, the
// server's ACK is recorded, the server's PINGs are answered (its keepalive
// keeps the connection), our PING is answered, and the server's CLOSE
// comes out of Recv with its code.
func TestConn_AgainstNetserver(t *testing.T) {
	srv := startFramed(t)
	c := dial(t, srv)

	before := time.Now()
	seq, err := c.SendAll([]byte("one"), []byte("two"))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq)
	for _, want := range []string{"one", "two"} {
		p, err := c.Recv()
		require.NoError(t, err)
		assert.Equal(t, want, string(p))
		assert.False(t, c.ReadTime().Before(before), "stamped at its arrival")
	}
	if c.Acked() < 2 {
		assert.Equal(t, uint64(2), nextOf(t, c, frame.TypeAck).Seq)
	}
	assert.Equal(t, uint64(2), c.Acked(), "the server acknowledged both")

	// Silence: the server probes, the Conn answers, and the server probes
	// again rather than closing: with one probe allowed, an unanswered one
	// is followed by a CLOSE 100ms later, never by another PING (nextOf
	// fails on the CLOSE's EOF).
	silent := time.Now()
	for range 3 {
		nextOf(t, c, frame.TypePing)
	}
	assert.Greater(t, time.Since(silent), 150*time.Millisecond, "still open past an unanswered probe's close")
	assert.GreaterOrEqual(t, srv.Stats().Probes, int64(3))

	require.NoError(t, c.Ping(77))
	assert.Equal(t, uint64(77), nextOf(t, c, frame.TypePong).Nonce)

	seq, err = c.Send([]byte("three"))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), seq)
	p, err := c.Recv()
	require.NoError(t, err)
	assert.Equal(t, "three", string(p))

	_, err = c.Send([]byte("bye"))
	require.NoError(t, err)
	_, err = c.Recv()
	var ce *frame.CloseError
	require.True(t, errors.As(err, &ce), "got %v", err)
	assert.Equal(t, frame.Code(4001), ce.Code)
	assert.Equal(t, "as asked", ce.Reason)
	require.NoError(t, c.Close(frame.CodeNormal, ""))
}

// Without ReplyPong the Conn leaves the server's PINGs unanswered, and the
// server's keepalive closes the connection with dead_peer.
func TestConn_WithoutPongsTheServerCloses(t *testing.T) {
	srv := startFramed(t)
	c := dial(t, srv)
	c.SetReplies(frame.ReplyAck)
	_, err := c.Send([]byte("one"))
	require.NoError(t, err)
	p, err := c.Recv()
	require.NoError(t, err)
	assert.Equal(t, "one", string(p))
	for {
		_, err = c.Recv() // PINGs are skipped
		if err != nil {
			break
		}
	}
	var ce *frame.CloseError
	require.True(t, errors.As(err, &ce), "got %v", err)
	assert.Equal(t, frame.CodeDeadPeer, ce.Code)
}

// A read deadline interrupts Next without losing a frame: Next goes on
// after the deadline is extended.
func TestConn_ReadDeadlineResumes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(peer)
			return
		}
		peer <- nc
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	c := frame.NewConn(nc, 0)
	defer c.Close(frame.CodeNormal, "")
	p, ok := <-peer
	require.True(t, ok)
	defer p.Close()

	msg := frame.AppendData(nil, 1, []byte("late"))
	_, err = p.Write(msg[:5]) // a frame cut short
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err = c.Recv()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	_, err = p.Write(msg[5:])
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
	got, err := c.Recv()
	require.NoError(t, err)
	assert.Equal(t, "late", string(got))
}
