package netserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// fuzzMaxFrame is the framed server's frame limit in FuzzFramed_Server:
// small, so that the fuzzer reaches frame_too_large.
const fuzzMaxFrame = 1 << 10

// sentinelNonce marks the client's last PING: its PONG comes after every
// reply to what the client sent before it.
const sentinelNonce = 1 << 63

// framedModel is what a framed echo server must answer to a client's
// stream: the frames it sends, ACKs aside (their grouping depends on how
// reads cut the stream), in order; how many DATA it acknowledges in all;
// and whether it ends the connection (with a CLOSE of code closeCode, 0
// for none, since a peer's CLOSE is not answered).
type framedModel struct {
	replies   []frame.Frame
	acked     uint64 // the new DATA received, which the last ACK covers
	ends      bool   // the server closes after the client's stream
	closeCode frame.Code
}

// framedProgram turns a program into what a client sends and the model of
// the server's replies. Each operation is a frame: a new DATA, a DATA sent
// again, an ACK (maybe of DATA the server never sent), a PING, a PONG, a
// CLOSE, a DATA that skips a sequence number, garbage (an unknown type, a
// zero length, a frame too large, a malformed ACK), or a GOAWAY (whose
// last DATA is right, or not; a new DATA after a GOAWAY is a protocol
// error). The stream stops after the first frame that ends the connection,
// which may be a DATA whose echo would leave too many unacknowledged.
func framedProgram(prog []byte) (stream []byte, m framedModel) {
	var recvNext, echoes, ackedTo uint64 = 1, 0, 0
	pings := 0
	away := false // the client has sent GOAWAY: no new DATA may follow
	next := func() byte {
		if len(prog) == 0 {
			return 0
		}
		b := prog[0]
		prog = prog[1:]
		return b
	}
	end := func(code frame.Code) {
		m.ends, m.closeCode = true, code
		if code != 0 {
			m.replies = append(m.replies, frame.Frame{Type: frame.TypeClose, Code: code})
		}
	}
	for len(prog) > 0 && !m.ends {
		switch op := next() % 8; op {
		case 0:
			n := min(int(next()%64), len(prog))
			payload := prog[:n]
			prog = prog[n:]
			stream = frame.AppendData(stream, recvNext, payload)
			if away {
				end(frame.CodeProtocol)
				break
			}
			recvNext++
			if echoes-ackedTo >= retransmit.DefaultWindow {
				// The echo would leave one DATA too many unacknowledged
				// (payloads this small never reach the byte limit).
				end(frame.CodeUnackedLimit)
				break
			}
			echoes++
			m.replies = append(m.replies, frame.Frame{Type: frame.TypeData, Seq: echoes, Payload: bytes.Clone(payload)})
		case 1:
			if recvNext > 1 {
				stream = frame.AppendData(stream, 1+uint64(next())%(recvNext-1), []byte("again"))
			}
		case 2:
			v := uint64(next()) % (echoes + 2) // echoes+1: never sent
			stream = frame.AppendAck(stream, v)
			if v > echoes {
				end(frame.CodeProtocol)
			}
			ackedTo = max(ackedTo, v)
		case 3:
			if pings < 50 { // well within the server's PING rate
				pings++
				nonce := uint64(next())
				stream = frame.AppendPing(stream, nonce)
				m.replies = append(m.replies, frame.Frame{Type: frame.TypePong, Nonce: nonce})
			}
		case 4:
			stream = frame.AppendPong(stream, uint64(next()))
		case 5:
			stream = frame.AppendClose(stream, frame.CodeNormal, "bye")
			end(0)
		case 6:
			stream = frame.AppendData(stream, recvNext+1+uint64(next()%4), []byte("gap"))
			end(frame.CodeProtocol)
		case 7:
			switch next() % 6 {
			case 0:
				stream = append(stream, 0, 0, 0, 2, 7+next()%200, 0) // unknown type
				end(frame.CodeProtocol)
			case 1:
				stream = append(stream, 0, 0, 0, 0) // zero length
				end(frame.CodeProtocol)
			case 2:
				stream = binary.BigEndian.AppendUint32(stream, fuzzMaxFrame+1+uint32(next()))
				stream = append(stream, byte(frame.TypeData))
				end(frame.CodeTooLarge)
			case 3:
				stream = append(stream, 0, 0, 0, 3, byte(frame.TypeAck), 0, 0) // an ACK cut short
				end(frame.CodeProtocol)
			case 4:
				stream = frame.AppendGoAway(stream, frame.CodeNormal, recvNext-1, 0, "")
				away = true
			case 5:
				stream = frame.AppendGoAway(stream, frame.CodeNormal, recvNext+uint64(next()%4), 0, "") // last ahead
				end(frame.CodeProtocol)
			}
		}
	}
	m.acked = recvNext - 1
	return stream, m
}

// FuzzFramed_Server: a client sends the stream the fuzzer's program makes,
// cut where the fuzzer says, to a framed echo server over real TCP, then,
// if the connection is still open, a PING whose PONG marks the end and an
// orderly CLOSE. Everything the server sends until it closes must be what
// the model says, in order: an echo for each new DATA, a PONG for each
// PING, the CLOSE with its code after a violation and nothing after it;
// its ACKs are cumulative, never ahead of the echoes sent before them, and
// end by covering every DATA received unless a CLOSE came first. Its own keepalive PINGs and
// retransmissions of an echo may come in between.
func FuzzFramed_Server(f *testing.F) {
	f.Add([]byte{0, 2, 'h', 'i', 3, 7, 2, 1, 1, 0, 4, 9}, []byte{3})
	f.Add([]byte{0, 1, 'a', 0, 1, 'b', 2, 3}, []byte{1})                   // an ACK of DATA never sent
	f.Add([]byte{0, 3, 'a', 'b', 'c', 6, 1}, []byte{255})                  // a gap
	f.Add([]byte{3, 1, 7, 0, 9}, []byte{0, 1})                             // an unknown type
	f.Add([]byte{0, 4, 'a', 'b', 'c', 'd', 7, 2, 5}, []byte{2})            // too large
	f.Add([]byte{0, 4, 'a', 'b', 'c', 'd', 5, 0, 1, 'x'}, []byte{})        // the client closes
	f.Add([]byte{0, 63, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 3}, []byte{6}) // garbage after a DATA
	f.Add([]byte{0, 1, 'a', 7, 4, 1, 0, 3, 1, 2}, []byte{4})               // a GOAWAY, a retransmission, a PING
	f.Add([]byte{0, 1, 'a', 7, 4, 0, 1, 'b'}, []byte{})                    // new DATA after a GOAWAY
	f.Add([]byte{0, 1, 'a', 7, 5, 2}, []byte{1})                           // a GOAWAY whose last is ahead
	srv, err := netserver.New(netserver.Config{
		Addr: "127.0.0.1:0", Protocol: netserver.Framed, EventLoops: 1, MaxFrame: fuzzMaxFrame,
	}, netserver.Echo{})
	require.NoError(f, err)
	require.NoError(f, srv.Start())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	addr := srv.Addr().String()

	f.Fuzz(func(t *testing.T, prog, cuts []byte) {
		stream, m := framedProgram(prog)
		if !m.ends {
			stream = frame.AppendPing(stream, sentinelNonce)
			m.replies = append(m.replies, frame.Frame{Type: frame.TypePong, Nonce: sentinelNonce})
		}
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer nc.Close()
		require.NoError(t, nc.SetDeadline(time.Now().Add(5*time.Second)))

		// The reader: everything until the server closes (or the
		// deadline), saying when the sentinel's PONG has come.
		out := make(chan []byte, 1)
		sentinel := make(chan struct{})
		go func() {
			var all []byte
			buf := make([]byte, 4096)
			seen := false
			for {
				n, err := nc.Read(buf)
				all = append(all, buf[:n]...)
				if !seen && bytes.Contains(all, frame.AppendPong(nil, sentinelNonce)) {
					seen = true
					close(sentinel)
				}
				if err != nil {
					out <- all
					return
				}
			}
		}()
		for i, rest := 0, stream; len(rest) > 0; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(n, 1+int(cuts[i%len(cuts)]))
			}
			if _, err := nc.Write(rest[:n]); err != nil {
				break // the server closed: what it sent says why
			}
			rest = rest[n:]
		}

		var got []byte
		select {
		case <-sentinel:
			// An orderly close: the server closes without a word.
			_, err := nc.Write(frame.AppendClose(nil, frame.CodeNormal, "done"))
			require.NoError(t, err)
			got = <-out
		case got = <-out: // the server closed (or the deadline passed)
		}
		want := m.replies

		var acked, echoed uint64
		var echoes [][]byte
		for used := 0; used < len(got); {
			r, n, err := frame.Parse(got[used:], frame.DefaultMax)
			require.NoError(t, err, "the server sent garbage at byte %d", used)
			used += n
			switch {
			case r.Type == frame.TypeAck:
				require.GreaterOrEqual(t, r.Seq, acked, "ACKs are cumulative")
				require.LessOrEqual(t, r.Seq, echoed, "an ACK before its echo")
				acked = r.Seq
				continue
			case r.Type == frame.TypePing:
				continue // keepalive
			case r.Type == frame.TypeData && r.Seq <= echoed:
				require.True(t, bytes.Equal(echoes[r.Seq-1], r.Payload), "a retransmission of echo %d: %q, was %q", r.Seq, r.Payload, echoes[r.Seq-1])
				continue
			}
			require.NotEmpty(t, want, "the server sent %+v past what the model expects", r)
			w := want[0]
			want = want[1:]
			if r.Type == frame.TypeClose {
				r.Reason = nil // readable text, not the model's
				require.Equal(t, len(got), used, "nothing after the CLOSE")
			}
			if len(r.Payload) == 0 && len(w.Payload) == 0 {
				r.Payload, w.Payload = nil, nil
			}
			require.Equal(t, w, r)
			if r.Type == frame.TypeData {
				echoed++
				echoes = append(echoes, bytes.Clone(r.Payload))
			}
		}
		require.Empty(t, want, "replies the server did not send")
		if !m.ends {
			// (A CLOSE, the client's or the server's, is final: the ACK
			// owed for the frames read with it is not sent.)
			require.Equal(t, m.acked, acked, "the last ACK covers every DATA")
		}
	})
}
