package frame_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver/frame"
)

// fuzzMax is the frame limit of the fuzz targets: small, so that the
// fuzzer reaches ErrTooLarge.
const fuzzMax = 1 << 12

// streamOf turns a program into a byte stream: each operation appends a
// frame of every type the protocol has, built from the program's bytes, or
// raw bytes (which may be anything: a cut frame, a bad type, a huge
// length). What the bytes say is taken as is; the stream is what a peer
// could send.
func streamOf(prog []byte) []byte {
	var out []byte
	u64 := func() uint64 {
		var b [8]byte
		n := copy(b[:], prog)
		prog = prog[n:]
		return binary.BigEndian.Uint64(b[:])
	}
	take := func(max int) []byte {
		if len(prog) == 0 {
			return nil
		}
		n := min(int(prog[0]), max, len(prog)-1)
		b := prog[1 : 1+n]
		prog = prog[1+n:]
		return b
	}
	for len(prog) > 0 {
		op := prog[0] % 8
		prog = prog[1:]
		switch op {
		case 0:
			seq := u64()
			out = frame.AppendData(out, seq, take(255))
		case 1:
			out = frame.AppendAck(out, u64())
		case 2:
			out = frame.AppendPing(out, u64())
		case 3:
			out = frame.AppendPong(out, u64())
		case 4:
			v := u64()
			out = frame.AppendClose(out, frame.Code(v), string(take(255)))
		case 5:
			v := u64()
			out = frame.AppendGoAway(out, frame.Code(v), u64(), time.Duration(v>>16)*time.Microsecond, string(take(255)))
		case 6:
			// A large DATA, past the Conn's read buffer when repeated.
			out = frame.AppendData(out, u64(), bytes.Repeat([]byte{0xa5}, int(u64()%(fuzzMax))))
		case 7:
			out = append(out, take(255)...)
		}
	}
	return out
}

// parsed is a frame with its bytes copied out of the buffer it came from.
func parsed(f frame.Frame) frame.Frame {
	f.Payload = bytes.Clone(f.Payload)
	f.Reason = bytes.Clone(f.Reason)
	return f
}

// oneShot parses the whole stream at once: the frames until the first
// error, the bytes they took, and that error (nil when the stream ends
// between frames, ErrShort when it ends inside one).
func oneShot(stream []byte) (frames []frame.Frame, used int, err error) {
	for used < len(stream) {
		f, n, err := frame.Parse(stream[used:], fuzzMax)
		if err != nil {
			return frames, used, err
		}
		frames = append(frames, parsed(f))
		used += n
	}
	return frames, used, nil
}

// FuzzDecoder_AnyCut: a stream of frames (and garbage) fed to a Decoder in
// pieces cut where the fuzzer says gives the frames a one-shot parse of
// the whole stream gives, and then the same outcome: the same error, or
// the same bytes left over.
func FuzzDecoder_AnyCut(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 'h', 'i', 1, 0, 0, 0, 0, 0, 0, 0, 1}, []byte{1})
	f.Add([]byte{5, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 4, 'g', 'o', 'n', 'e', 4, 0, 0, 0, 0, 0, 0, 0, 2, 0}, []byte{3, 7, 1})
	f.Add([]byte{6, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 15, 255, 2, 9, 9, 9, 9, 9, 9, 9, 9}, []byte{200, 1, 50})
	f.Add([]byte{7, 5, 0, 0, 0, 1, 99, 2, 0, 0, 0, 0, 0, 0, 0, 0}, []byte{2})           // an unknown type
	f.Add([]byte{7, 5, 0xff, 0xff, 0xff, 0xf0, 1}, []byte{1})                           // a huge length
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 7, 20, 'x', 7, 3, 0, 0, 0}, []byte{0, 0, 255}) // a cut frame at the end
	f.Fuzz(func(t *testing.T, prog, cuts []byte) {
		stream := streamOf(prog)
		want, used, wantErr := oneShot(stream)

		d := frame.NewDecoder(fuzzMax)
		var got []frame.Frame
		var gotErr error
		for i, rest := 0, stream; len(rest) > 0 && gotErr == nil; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(n, 1+int(cuts[i%len(cuts)]))
			}
			d.Feed(rest[:n])
			rest = rest[n:]
			for {
				f, ok, err := d.Next()
				if err != nil {
					gotErr = err
					break
				}
				if !ok {
					break
				}
				got = append(got, parsed(f))
			}
		}
		require.Equal(t, want, got)
		switch {
		case wantErr == nil:
			require.NoError(t, gotErr)
			require.Zero(t, d.Buffered())
		case errors.Is(wantErr, frame.ErrShort):
			require.NoError(t, gotErr, "a cut frame waits for more")
			require.Equal(t, len(stream)-used, d.Buffered())
		default:
			require.ErrorIs(t, gotErr, wantErr)
			_, ok, err := d.Next()
			require.False(t, ok)
			require.ErrorIs(t, err, wantErr, "from then on")
		}
	})
}

// connModel is what a Conn must make of a server's stream: the frames Next
// returns and how it ends, and, up to the first CLOSE (after which the
// Conn writes nothing), the PINGs it must answer, the DATA it acknowledges
// and the GOAWAYs it takes note of.
type connModel struct {
	frames  []frame.Frame
	err     error // nil: the stream ends cleanly, Next then returns io.EOF
	closed  bool  // a CLOSE is among the frames
	pings   []uint64
	arrived uint64
	goAways []frame.Code
}

func modelConn(stream []byte) connModel {
	var m connModel
	var delivered uint64
	for used := 0; used < len(stream); {
		f, n, err := frame.Parse(stream[used:], fuzzMax)
		if errors.Is(err, frame.ErrShort) {
			break // the Conn waits for the rest, and gets EOF
		}
		if err != nil {
			m.err = err
			break
		}
		used += n
		switch {
		case f.Type == frame.TypeData && f.Seq > delivered+1,
			f.Type == frame.TypeGoAway && f.Seq != delivered:
			m.err = frame.ErrMalformed
		case f.Type == frame.TypeData && f.Seq == delivered+1:
			delivered++
		}
		if m.err != nil {
			break
		}
		m.frames = append(m.frames, parsed(f))
		if m.closed {
			continue
		}
		switch f.Type {
		case frame.TypePing:
			m.pings = append(m.pings, f.Nonce)
		case frame.TypeGoAway:
			m.goAways = append(m.goAways, f.Code)
		case frame.TypeClose:
			m.closed = true
		}
		m.arrived = delivered
	}
	return m
}

// FuzzConn_HostileServer: a server sends whatever the fuzzer makes of a
// program (frames of every type, sequence numbers out of order, garbage,
// cut at the fuzzer's points over real TCP) and half-closes. The Conn,
// reading with Next, never panics and never hangs (every read is bounded
// by a deadline that must not pass): it returns the frames a model of the
// protocol expects, then the model's error (io.EOF when the stream was
// well-formed). Meanwhile the client sends a few DATA of its own. What
// the Conn wrote is well-formed and only what the frames called for:
// PONGs for the PINGs in order, cumulative ACKs never past what arrived,
// at most one GOAWAY answering one of the server's and naming the last
// DATA before it, no DATA after it (a send is refused from then on, and
// only then), nothing owed only after the final CLOSE; and with no CLOSE,
// every PING answered, every DATA acknowledged and a GOAWAY answered.
func FuzzConn_HostileServer(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 'h', 'i', 2, 0, 0, 0, 0, 0, 0, 0, 7, 5, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0}, []byte{3})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 0, 0, 0, 3, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2}, []byte{255})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 2, 0}, []byte{1})                        // a gap
	f.Add([]byte{5, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0}, []byte{}) // a GOAWAY with a wrong last
	f.Add([]byte{7, 5, 0, 0, 0, 1, 99}, []byte{0})                                // an unknown type
	f.Add([]byte{6, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 15, 0}, []byte{10, 200})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f, err)
	defer ln.Close()
	f.Fuzz(func(t *testing.T, prog, cuts []byte) {
		stream := streamOf(prog)
		m := modelConn(stream)

		nc, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer nc.Close()
		srv, err := ln.Accept()
		require.NoError(t, err)
		defer srv.Close()
		deadline := time.Now().Add(5 * time.Second)
		require.NoError(t, nc.SetDeadline(deadline))
		require.NoError(t, srv.SetDeadline(deadline))
		c := frame.NewConn(nc, fuzzMax)

		// The server: the stream in pieces, a half-close, then all the
		// Conn wrote until it closes.
		replies := make(chan []byte, 1)
		go func() {
			for i, rest := 0, stream; len(rest) > 0; i++ {
				n := len(rest)
				if len(cuts) > 0 {
					n = min(n, 1+int(cuts[i%len(cuts)]))
				}
				if _, err := srv.Write(rest[:n]); err != nil {
					break // the Conn stopped reading and closed
				}
				rest = rest[n:]
			}
			_ = srv.(*net.TCPConn).CloseWrite()
			b, _ := io.ReadAll(srv)
			replies <- b
		}()

		// The client's own DATA, sent while the Conn reads: a few, one
		// after another, each refused once a GOAWAY has been answered.
		type sendResult struct {
			seq uint64
			err error
		}
		sends := make(chan []sendResult, 1)
		go func() {
			var rs []sendResult
			for i := range len(prog) % 6 {
				seq, err := c.Send([]byte{'d', byte(i)})
				rs = append(rs, sendResult{seq, err})
				runtime.Gosched()
			}
			sends <- rs
		}()

		var got []frame.Frame
		var end error
		for {
			f, err := c.Next()
			if err != nil {
				end = err
				break
			}
			got = append(got, parsed(f))
		}
		require.NotErrorIs(t, end, os.ErrDeadlineExceeded, "the Conn hung")
		require.Equal(t, m.frames, got)
		if m.err == nil {
			require.ErrorIs(t, end, io.EOF)
		} else {
			require.ErrorIs(t, end, m.err)
		}
		away, ok := c.GoingAway()
		require.Equal(t, len(m.goAways) > 0, ok, "GoingAway")
		if ok {
			require.Equal(t, m.goAways[len(m.goAways)-1], away.Code)
		}
		sent := <-sends
		var dataSent uint64
		refused := false
		for i, r := range sent {
			if r.err != nil {
				require.ErrorIs(t, r.err, frame.ErrGoingAway, "send %d", i)
				refused = true
				continue
			}
			require.False(t, refused, "send %d went out after one was refused", i)
			dataSent++
			require.Equal(t, dataSent, r.seq)
		}
		require.NoError(t, nc.Close())
		out := <-replies

		// The Conn's replies and its DATA.
		var pongs []uint64
		var acked, data uint64
		answers := 0
		for used := 0; used < len(out); {
			r, n, err := frame.Parse(out[used:], frame.DefaultMax)
			require.NoError(t, err, "the Conn wrote garbage: %x", out[used:])
			used += n
			switch r.Type {
			case frame.TypePong:
				pongs = append(pongs, r.Nonce)
			case frame.TypeAck:
				require.GreaterOrEqual(t, r.Seq, acked, "ACKs are cumulative")
				require.LessOrEqual(t, r.Seq, m.arrived, "an ACK past what arrived before the CLOSE")
				acked = r.Seq
			case frame.TypeGoAway:
				answers++
				require.Equal(t, 1, answers, "one answer")
				require.Contains(t, m.goAways, r.Code)
				require.Equal(t, data, r.Seq, "the answer names its last DATA")
			case frame.TypeData:
				require.Zero(t, answers, "a DATA after the Conn's GOAWAY")
				require.Equal(t, frame.Frame{Type: frame.TypeData, Seq: data + 1, Payload: []byte{'d', byte(data)}}, parsed(r))
				data++
			default:
				t.Fatalf("the Conn wrote %v on its own: %+v", r.Type, r)
			}
		}
		require.LessOrEqual(t, len(pongs), len(m.pings))
		require.True(t, slices.Equal(m.pings[:len(pongs)], pongs), "PONGs for the PINGs, in order: %v for %v", pongs, m.pings)
		require.Equal(t, dataSent, data, "the DATA sent is the DATA the server read")
		if refused {
			require.Equal(t, 1, answers, "a send refused, and no GOAWAY answered")
		}
		if !m.closed {
			require.True(t, slices.Equal(m.pings, pongs), "every PING answered: %v for %v", pongs, m.pings)
			require.Equal(t, m.arrived, acked, "every DATA acknowledged")
			require.Equal(t, len(m.goAways) > 0, answers == 1, "a GOAWAY answered")
		}
	})
}
