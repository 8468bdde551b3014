package frame_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/netserver/frame"
)

// TestConn_AnySegmentationOverTCP: a peer writes DATA (some larger than the
// Conn's 16 KiB read buffer, up to DefaultMax), PINGs and ACKs over real
// TCP, cut at random bytes, some pieces a single byte. The Conn returns
// every frame once and in order with its payload intact, answers every
// PING with its nonce, acknowledges the last DATA and records the last ACK,
// however the reads cut the frames.
func TestConn_AnySegmentationOverTCP(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	// The largest DATA payload whose length field (type, seq, payload) is
	// DefaultMax, the largest the Conn accepts.
	const maxPayload = frame.DefaultMax - (frame.DataHeaderSize - frame.LenSize)
	var stream []byte
	var want []frame.Frame
	var nonces []uint64
	for i := range 120 {
		size := rng.IntN(3000)
		switch {
		case i == 60:
			size = maxPayload // the largest frame, every run
		case i%10 == 0:
			size = 16<<10 + rng.IntN(maxPayload-16<<10+1) // over the read buffer
		}
		p := randomBytes(rng, size)
		seq := uint64(i + 1)
		stream = frame.AppendData(stream, seq, p)
		want = append(want, frame.Frame{Type: frame.TypeData, Seq: seq, Payload: p})
		if i%9 == 0 {
			stream = frame.AppendPing(stream, 1000+seq)
			want = append(want, frame.Frame{Type: frame.TypePing, Nonce: 1000 + seq})
			nonces = append(nonces, 1000+seq)
		}
		if i%13 == 0 {
			stream = frame.AppendAck(stream, seq)
			want = append(want, frame.Frame{Type: frame.TypeAck, Seq: seq})
		}
	}
	lastData := uint64(120)

	type answers struct {
		pongs   []uint64
		lastAck uint64
	}
	peer := make(chan answers, 1)
	addr := testnet.Serve(t, func(nc net.Conn, _ uint64) {
		var got answers
		defer func() { peer <- got }()
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		// The Conn's answers, read while the stream goes out.
		done := make(chan struct{})
		go func() {
			defer close(done)
			d := frame.NewDecoder(0)
			buf := make([]byte, 4096)
			for got.lastAck < lastData || len(got.pongs) < len(nonces) {
				n, err := nc.Read(buf)
				if err != nil {
					return
				}
				d.Feed(buf[:n])
				for f, ok, _ := d.Next(); ok; f, ok, _ = d.Next() {
					switch f.Type {
					case frame.TypePong:
						got.pongs = append(got.pongs, f.Nonce)
					case frame.TypeAck:
						got.lastAck = max(got.lastAck, f.Seq)
					}
				}
			}
		}()
		for rest := stream; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 20000))
			if rng.IntN(8) == 0 {
				n = 1
			}
			if _, err := nc.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		<-done
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := frame.Dial(ctx, addr)
	require.NoError(t, err)
	defer c.Close(frame.CodeNormal, "")
	require.NoError(t, c.NetConn().SetDeadline(time.Now().Add(20*time.Second)))
	for k, w := range want {
		f, err := c.Next()
		require.NoError(t, err, "frame %d of %d", k, len(want))
		require.Equal(t, w.Type, f.Type, "frame %d", k)
		switch w.Type {
		case frame.TypeData:
			require.Equal(t, w.Seq, f.Seq, "frame %d", k)
			require.True(t, bytes.Equal(w.Payload, f.Payload), "frame %d: DATA %d's payload (%d bytes) differs", k, w.Seq, len(w.Payload))
		case frame.TypePing:
			require.Equal(t, w.Nonce, f.Nonce, "frame %d", k)
		case frame.TypeAck:
			require.Equal(t, w.Seq, f.Seq, "frame %d", k)
		}
	}
	got := <-peer
	assert.Equal(t, nonces, got.pongs, "every PING answered once, in order")
	assert.Equal(t, lastData, got.lastAck, "the last DATA acknowledged")
	assert.Equal(t, uint64(118), c.Acked(), "the last ACK recorded") // 117 (i = 117) is the last i%13 == 0: seq 118
}
