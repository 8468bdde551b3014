package frame_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver/frame"
)

// scripted connects a Conn to a scripted server over real TCP on
// 127.0.0.1 and returns both ends; every read and write of either is
// bounded by a 10 s deadline. A test plays the server on srv with raw
// frames.
func scripted(t *testing.T) (c *frame.Conn, srv net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	srv, err = ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close(); _ = srv.Close() })
	deadline := time.Now().Add(10 * time.Second)
	require.NoError(t, nc.SetDeadline(deadline))
	require.NoError(t, srv.SetDeadline(deadline))
	return frame.NewConn(nc, 0), srv
}

// peerReader reads the Conn's frames on the scripted server's side.
type peerReader struct {
	nc  net.Conn
	dec *frame.Decoder
	buf []byte
}

func newPeerReader(nc net.Conn) *peerReader {
	return &peerReader{nc: nc, dec: frame.NewDecoder(0), buf: make([]byte, 64<<10)}
}

// next returns the next frame, copied, or the read's error (io.EOF when the
// Conn closed).
func (p *peerReader) next() (frame.Frame, error) {
	for {
		f, ok, err := p.dec.Next()
		if err != nil {
			return frame.Frame{}, err
		}
		if ok {
			f.Payload = bytes.Clone(f.Payload)
			f.Reason = bytes.Clone(f.Reason)
			return f, nil
		}
		n, err := p.nc.Read(p.buf)
		p.dec.Feed(p.buf[:n])
		if err != nil && n == 0 {
			return frame.Frame{}, err
		}
	}
}

// TestConn_GoAway: the scripted server reads three DATA, then sends the
// echo of the first, its GOAWAY (last DATA 1), a PING and the echoes of the
// other two, which were in flight. The Conn answers the GOAWAY with its own
// (last DATA 3, after all three), acknowledges every echo, answers the
// PING, returns the three echoes from Recv, refuses a new DATA with
// ErrGoingAway and still sends a PING. The final CLOSE, sent with a DATA
// and a PING in the same write, ends it: Recv returns the DATA and then the
// CloseError, the Conn writes nothing after the CLOSE (no ACK, no PONG),
// and its Close only closes the connection.
func TestConn_GoAway(t *testing.T) {
	c, srv := scripted(t)
	peer := newPeerReader(srv)

	first, err := c.SendAll([]byte("a"), []byte("b"), []byte("c"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), first)
	for seq := uint64(1); seq <= 3; seq++ {
		f, err := peer.next()
		require.NoError(t, err)
		require.Equal(t, frame.Frame{Type: frame.TypeData, Seq: seq, Payload: []byte{'a' + byte(seq-1)}}, f)
	}
	var script []byte
	script = frame.AppendData(script, 1, []byte("a"))
	script = frame.AppendGoAway(script, frame.CodeShutdown, 1, 2*time.Second, "draining")
	script = frame.AppendPing(script, 5)
	script = frame.AppendData(script, 2, []byte("b"))
	script = frame.AppendData(script, 3, []byte("c"))
	_, err = srv.Write(script)
	require.NoError(t, err)

	before := time.Now()
	for _, want := range []string{"a", "b", "c"} {
		p, err := c.Recv()
		require.NoError(t, err)
		assert.Equal(t, want, string(p))
	}
	away, ok := c.GoingAway()
	require.True(t, ok)
	assert.Equal(t, frame.CodeShutdown, away.Code)
	assert.Equal(t, 2*time.Second, away.Grace)
	assert.Equal(t, "draining", away.Reason)
	assert.False(t, away.At.After(time.Now()) || away.At.Before(before.Add(-time.Second)), "stamped at its read: %v", away.At)

	_, err = c.Send([]byte("d"))
	require.ErrorIs(t, err, frame.ErrGoingAway)
	assert.Contains(t, err.Error(), "shutdown")
	_, err = c.SendAll()
	require.ErrorIs(t, err, frame.ErrGoingAway, "nothing starts, not even an empty batch")
	require.NoError(t, c.Ping(9), "a PING is not refused")

	// What the Conn sent after its DATA: ACKs up to 3, PONG 5, its GOAWAY
	// with last DATA 3, PING 9; no DATA.
	var gotAway *frame.Frame
	var acked, pong, ping uint64
	for acked < 3 || pong == 0 || gotAway == nil || ping == 0 {
		f, err := peer.next()
		require.NoError(t, err, "acked %d pong %d goaway %v ping %d", acked, pong, gotAway, ping)
		switch f.Type {
		case frame.TypeAck:
			require.Greater(t, f.Seq, acked, "ACKs advance")
			acked = f.Seq
		case frame.TypePong:
			pong = f.Nonce
		case frame.TypeGoAway:
			require.Nil(t, gotAway, "one answer")
			gotAway = &f
		case frame.TypePing:
			ping = f.Nonce
		default:
			t.Fatalf("unexpected %v from the Conn after its GOAWAY: %+v", f.Type, f)
		}
	}
	assert.Equal(t, uint64(5), pong)
	assert.Equal(t, uint64(9), ping)
	assert.Equal(t, frame.CodeShutdown, gotAway.Code)
	assert.Equal(t, uint64(3), gotAway.Seq, "its last DATA")
	assert.Zero(t, gotAway.Grace)

	var final []byte
	final = frame.AppendData(final, 4, []byte("last"))
	final = frame.AppendPing(final, 6)
	final = frame.AppendClose(final, frame.CodeShutdown, "drained")
	_, err = srv.Write(final)
	require.NoError(t, err)
	p, err := c.Recv()
	require.NoError(t, err)
	assert.Equal(t, "last", string(p))
	_, err = c.Recv()
	var ce *frame.CloseError
	require.True(t, errors.As(err, &ce), "got %v", err)
	assert.Equal(t, frame.CodeShutdown, ce.Code)
	assert.Equal(t, "drained", ce.Reason)
	require.NoError(t, c.Close(frame.CodeNormal, "bye"))

	f, err := peer.next()
	require.ErrorIs(t, err, io.EOF, "nothing after the final CLOSE, got %+v", f)
	assert.Equal(t, uint64(3), acked, "DATA 4 came with the CLOSE: not acknowledged")
}

// TestConn_GoAwayLetsTheSendUnderWayFinish: a batch bigger than the
// socket buffers is being written when the server sends GOAWAY (it read the
// first bytes of the batch, then stopped reading). The batch completes, the
// Conn's GOAWAY follows it and names its last DATA, and the echoes of the
// whole batch, sent after the GOAWAY, are acknowledged and returned.
func TestConn_GoAwayLetsTheSendUnderWayFinish(t *testing.T) {
	c, srv := scripted(t)
	require.NoError(t, c.NetConn().(*net.TCPConn).SetWriteBuffer(16<<10))
	require.NoError(t, srv.(*net.TCPConn).SetReadBuffer(16<<10))
	peer := newPeerReader(srv)

	const n = 64
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte(i)}, 16<<10)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := c.SendAll(payloads...)
		sent <- err
	}()
	recvd := make(chan error, 1)
	go func() {
		for i := range n {
			p, err := c.Recv()
			if err != nil {
				recvd <- err
				return
			}
			if !bytes.Equal(p, payloads[i]) {
				recvd <- errors.New("an echo differs")
				return
			}
		}
		_, err := c.Recv()
		recvd <- err
	}()

	head := make([]byte, frame.HeaderSize)
	_, err := io.ReadFull(srv, head) // the batch's write has begun
	require.NoError(t, err)
	_, err = srv.Write(frame.AppendGoAway(nil, frame.CodeMaxAge, 0, time.Second, "max age"))
	require.NoError(t, err)
	peer.dec.Feed(head)

	for i := range n {
		f, err := peer.next()
		require.NoError(t, err)
		require.Equal(t, frame.TypeData, f.Type, "frame %d", i)
		require.Equal(t, uint64(i+1), f.Seq)
	}
	require.NoError(t, <-sent, "the send under way completes")
	f, err := peer.next()
	require.NoError(t, err)
	require.Equal(t, frame.TypeGoAway, f.Type, "the answer follows the batch: %+v", f)
	assert.Equal(t, uint64(n), f.Seq)
	assert.Equal(t, frame.CodeMaxAge, f.Code)
	_, err = c.Send([]byte("more"))
	require.ErrorIs(t, err, frame.ErrGoingAway)

	var echoes []byte
	for i := range n {
		echoes = frame.AppendData(echoes, uint64(i+1), payloads[i])
	}
	_, err = srv.Write(echoes)
	require.NoError(t, err)
	for acked := uint64(0); acked < n; {
		f, err := peer.next()
		require.NoError(t, err)
		require.Equal(t, frame.TypeAck, f.Type)
		acked = f.Seq
	}
	_, err = srv.Write(frame.AppendClose(nil, frame.CodeMaxAge, "max age"))
	require.NoError(t, err)
	var ce *frame.CloseError
	err = <-recvd
	require.True(t, errors.As(err, &ce), "got %v", err)
	assert.Equal(t, frame.CodeMaxAge, ce.Code)
}

// TestConn_GoAwayRules: what the Conn does with GOAWAYs that are not the
// plain case.
func TestConn_GoAwayRules(t *testing.T) {
	t.Run("a wrong last DATA is a protocol error", func(t *testing.T) {
		c, srv := scripted(t)
		peer := newPeerReader(srv)
		var b []byte
		b = frame.AppendData(b, 1, []byte("x"))
		b = frame.AppendGoAway(b, frame.CodeShutdown, 2, time.Second, "")
		_, err := srv.Write(b)
		require.NoError(t, err)
		p, err := c.Recv()
		require.NoError(t, err)
		assert.Equal(t, "x", string(p))
		_, err = c.Recv()
		require.ErrorIs(t, err, frame.ErrMalformed)
		_, err = c.Recv()
		require.ErrorIs(t, err, frame.ErrMalformed, "from then on")
		_, ok := c.GoingAway()
		assert.False(t, ok, "a broken GOAWAY is not a notice")
		_, err = c.Send([]byte("y"))
		require.NoError(t, err, "not refused")
		f, err := peer.next()
		require.NoError(t, err)
		assert.Equal(t, frame.Frame{Type: frame.TypeAck, Seq: 1}, f, "DATA 1 acknowledged, no answer to the GOAWAY")
	})
	t.Run("only the first is answered, the latest is reported", func(t *testing.T) {
		c, srv := scripted(t)
		peer := newPeerReader(srv)
		_, err := srv.Write(frame.AppendGoAway(nil, frame.CodeMaxAge, 0, 10*time.Second, "max age"))
		require.NoError(t, err)
		nextOf(t, c, frame.TypeGoAway)
		_, err = srv.Write(frame.AppendGoAway(frame.AppendPing(nil, 1), frame.CodeShutdown, 0, time.Second, "shutdown"))
		require.NoError(t, err)
		nextOf(t, c, frame.TypeGoAway)
		away, ok := c.GoingAway()
		require.True(t, ok)
		assert.Equal(t, frame.CodeShutdown, away.Code)
		assert.Equal(t, time.Second, away.Grace)
		f, err := peer.next()
		require.NoError(t, err)
		assert.Equal(t, frame.TypeGoAway, f.Type)
		assert.Equal(t, frame.CodeMaxAge, f.Code, "the answer to the first")
		f, err = peer.next()
		require.NoError(t, err)
		assert.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: 1}, f, "no second answer")
	})
	t.Run("without ReplyGoAway the notice is only reported", func(t *testing.T) {
		c, srv := scripted(t)
		c.SetReplies(frame.ReplyAck | frame.ReplyPong)
		peer := newPeerReader(srv)
		_, err := srv.Write(frame.AppendGoAway(frame.AppendPing(nil, 3), frame.CodeShutdown, 0, time.Second, ""))
		require.NoError(t, err)
		nextOf(t, c, frame.TypeGoAway)
		_, ok := c.GoingAway()
		require.True(t, ok)
		seq, err := c.Send([]byte("still"))
		require.NoError(t, err)
		assert.Equal(t, uint64(1), seq)
		f, err := peer.next()
		require.NoError(t, err)
		assert.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: 3}, f)
		f, err = peer.next()
		require.NoError(t, err)
		assert.Equal(t, frame.TypeData, f.Type, "no GOAWAY answer before it")
	})
	t.Run("a CLOSE stops the replies", func(t *testing.T) {
		c, srv := scripted(t)
		peer := newPeerReader(srv)
		_, err := srv.Write(frame.AppendClose(frame.AppendPing(nil, 4), frame.CodeIdle, "idle"))
		require.NoError(t, err)
		_, err = c.Recv()
		var ce *frame.CloseError
		require.True(t, errors.As(err, &ce), "got %v", err)
		require.NoError(t, srv.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
		_, err = peer.next()
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "no PONG after the final CLOSE")
	})
}
