package frame_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/netserver/frame"
)

// randomBytes returns n bytes drawn from rng: a payload to send.
func randomBytes(rng *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(rng.Uint32())
	}
	return p
}

// The Decoder gives the same frames however the stream is cut: at every
// byte, one byte at a time, or whole.
func TestDecoder_AnySegmentation(t *testing.T) {
	var stream []byte
	var want []frame.Frame
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		p := randomBytes(rng, rng.IntN(3000))
		stream = frame.AppendData(stream, uint64(i+1), p)
		want = append(want, frame.Frame{Type: frame.TypeData, Seq: uint64(i + 1), Payload: p})
		if i%7 == 0 {
			stream = frame.AppendPing(stream, uint64(i))
			want = append(want, frame.Frame{Type: frame.TypePing, Nonce: uint64(i)})
		}
	}
	for _, tc := range []struct {
		name string
		cut  func(rest int) int // the size of the next piece
	}{
		{name: "whole", cut: func(rest int) int { return rest }},
		{name: "one byte at a time", cut: func(int) int { return 1 }},
		{name: "random pieces", cut: func(rest int) int { return 1 + rng.IntN(min(rest, 5000)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := frame.NewDecoder(0)
			var got []frame.Frame
			for rest := stream; len(rest) > 0; {
				n := tc.cut(len(rest))
				d.Feed(rest[:n])
				rest = rest[n:]
				for {
					f, ok, err := d.Next()
					require.NoError(t, err)
					if !ok {
						break
					}
					f.Payload = append([]byte(nil), f.Payload...)
					got = append(got, f)
				}
				assert.LessOrEqual(t, d.Buffered(), frame.LenSize+3000+frame.DataHeaderSize, "at most one partial frame kept")
			}
			require.Len(t, got, len(want))
			for i := range want {
				if want[i].Type == frame.TypeData && len(want[i].Payload) == 0 {
					got[i].Payload = want[i].Payload // nil and empty alike
				}
				require.Equal(t, want[i], got[i], "frame %d", i)
			}
			assert.Zero(t, d.Buffered())
		})
	}
}

// A malformed or oversized frame is an error from then on.
func TestDecoder_Errors(t *testing.T) {
	d := frame.NewDecoder(100)
	d.Feed([]byte{0, 0, 1, 0, 1}) // a length of 256 > 100
	_, ok, err := d.Next()
	assert.False(t, ok)
	require.ErrorIs(t, err, frame.ErrTooLarge)
	d.Feed(frame.AppendPing(nil, 1))
	_, _, err = d.Next()
	assert.ErrorIs(t, err, frame.ErrTooLarge, "no resynchronization")
}

// Conn against a scripted peer: DATA is delivered once and in order and
// acknowledged, a retransmission is acknowledged again and skipped, PINGs
// are answered, ACKs recorded, and the peer's CLOSE ends Recv.
func TestConn_AgainstAScriptedPeer(t *testing.T) {
	peerGot := make(chan []frame.Frame, 1)
	addr := testnet.Serve(t, func(nc net.Conn, _ uint64) {
		var out []byte
		out = frame.AppendData(out, 1, []byte("one"))
		out = frame.AppendPing(out, 9)
		out = frame.AppendData(out, 1, []byte("one")) // a retransmission
		out = frame.AppendData(out, 2, []byte("two"))
		out = frame.AppendAck(out, 1)
		for _, b := range out { // one byte at a time
			_, _ = nc.Write([]byte{b})
		}
		d := frame.NewDecoder(0)
		var got []frame.Frame
		buf := make([]byte, 1024)
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		// The client's DATA, and what it answered, up to its ACK of 2.
		for len(got) == 0 || got[len(got)-1].Type != frame.TypeAck || got[len(got)-1].Seq != 2 {
			n, err := nc.Read(buf)
			if err != nil {
				break
			}
			d.Feed(buf[:n])
			for f, ok, _ := d.Next(); ok; f, ok, _ = d.Next() {
				f.Payload = append([]byte(nil), f.Payload...)
				got = append(got, f)
			}
		}
		_, _ = nc.Write(frame.AppendClose(nil, frame.CodeIdle, "bye"))
		peerGot <- got
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := frame.Dial(ctx, addr)
	require.NoError(t, err)
	require.NoError(t, c.NetConn().SetDeadline(time.Now().Add(5*time.Second)))
	seq, err := c.Send([]byte("mine"))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq)
	p, err := c.Recv()
	require.NoError(t, err)
	assert.Equal(t, "one", string(p))
	p, err = c.Recv()
	require.NoError(t, err)
	assert.Equal(t, "two", string(p), "the retransmission of 1 was skipped")
	_, err = c.Recv()
	var ce *frame.CloseError
	require.True(t, errors.As(err, &ce), "got %v", err)
	assert.Equal(t, frame.CodeIdle, ce.Code)
	assert.Equal(t, "bye", ce.Reason)
	assert.Equal(t, uint64(1), c.Acked())

	got := <-peerGot
	var types []frame.Type
	var acks []uint64
	for _, f := range got {
		types = append(types, f.Type)
		if f.Type == frame.TypeAck {
			acks = append(acks, f.Seq)
		}
	}
	assert.Contains(t, types, frame.TypePong, "the PING was answered")
	assert.Equal(t, frame.Frame{Type: frame.TypeData, Seq: 1, Payload: []byte("mine")}, got[0])
	require.NotEmpty(t, acks)
	assert.Equal(t, uint64(2), acks[len(acks)-1], "cumulative ACKs up to 2: %v", acks)
	require.NoError(t, c.Close(frame.CodeNormal, ""))
}
