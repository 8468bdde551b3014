package frame_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver/frame"
)

func TestRoundTrip(t *testing.T) {
	var buf []byte
	buf = frame.AppendData(buf, 7, []byte("hello"))
	buf = frame.AppendAck(buf, 6)
	buf = frame.AppendPing(buf, 42)
	buf = frame.AppendPong(buf, 43)
	buf = frame.AppendClose(buf, frame.CodeIdle, "idle for 30s")
	buf = frame.AppendGoAway(buf, frame.CodeMaxAge, 9, 1500*time.Millisecond, "max age 1h")
	want := []frame.Frame{
		{Type: frame.TypeData, Seq: 7, Payload: []byte("hello")},
		{Type: frame.TypeAck, Seq: 6},
		{Type: frame.TypePing, Nonce: 42},
		{Type: frame.TypePong, Nonce: 43},
		{Type: frame.TypeClose, Code: frame.CodeIdle, Reason: []byte("idle for 30s")},
		{Type: frame.TypeGoAway, Code: frame.CodeMaxAge, Seq: 9, Grace: 1500 * time.Millisecond, Reason: []byte("max age 1h")},
	}
	for i, w := range want {
		f, n, err := frame.Parse(buf, frame.DefaultMax)
		require.NoError(t, err, "frame %d", i)
		assert.Equal(t, w.Type, f.Type)
		assert.Equal(t, w.Seq, f.Seq)
		assert.Equal(t, w.Nonce, f.Nonce)
		assert.Equal(t, w.Code, f.Code)
		assert.Equal(t, w.Grace, f.Grace)
		assert.Equal(t, string(w.Reason), string(f.Reason))
		assert.Equal(t, string(w.Payload), string(f.Payload))
		buf = buf[n:]
	}
	assert.Empty(t, buf)
}

func TestParse_Errors(t *testing.T) {
	data := frame.AppendData(nil, 1, bytes.Repeat([]byte{'x'}, 100))
	for _, tc := range []struct {
		name string
		buf  []byte
		max  int
		want error
	}{
		{name: "empty", buf: nil, max: 1 << 10, want: frame.ErrShort},
		{name: "partial prefix", buf: data[:3], max: 1 << 10, want: frame.ErrShort},
		{name: "partial body", buf: data[:50], max: 1 << 10, want: frame.ErrShort},
		{name: "too large", buf: data[:4], max: 50, want: frame.ErrTooLarge},
		{name: "zero length", buf: []byte{0, 0, 0, 0}, max: 1 << 10, want: frame.ErrMalformed},
		{name: "unknown type", buf: []byte{0, 0, 0, 1, 99}, max: 1 << 10, want: frame.ErrType},
		{name: "short data", buf: []byte{0, 0, 0, 3, 1, 0, 0}, max: 1 << 10, want: frame.ErrMalformed},
		{name: "long ack", buf: append(frame.AppendAck(nil, 1)[:4:4], append([]byte{2}, make([]byte, 9)...)...), max: 1 << 10, want: frame.ErrMalformed},
		{name: "bad utf8 reason", buf: []byte{0, 0, 0, 4, 5, 0, 1, 0xff}, max: 1 << 10, want: frame.ErrMalformed},
		{name: "short goaway", buf: frame.AppendGoAway(nil, frame.CodeShutdown, 1, time.Second, "")[:14], max: 1 << 10, want: frame.ErrShort},
		{name: "goaway without last", buf: []byte{0, 0, 0, 7, 6, 0, 2, 0, 0, 0, 1}, max: 1 << 10, want: frame.ErrMalformed},
		{name: "bad utf8 goaway reason", buf: append(goAwayHead(16), 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff), max: 1 << 10, want: frame.ErrMalformed},
		{name: "long goaway reason", buf: append(append(goAwayHead(15+frame.MaxReasonLen+1), make([]byte, 14)...), bytes.Repeat([]byte{'r'}, frame.MaxReasonLen+1)...), max: 1 << 10, want: frame.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "long ack" {
				binary.BigEndian.PutUint32(tc.buf, 10)
			}
			_, _, err := frame.Parse(tc.buf, tc.max)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	assert.Equal(t, len(data), frame.Need(data[:4]))
	assert.Zero(t, frame.Need(data[:3]))
}

// goAwayHead is the length prefix and type of a GOAWAY of length field l.
func goAwayHead(l uint32) []byte {
	return append(binary.BigEndian.AppendUint32(nil, l), byte(frame.TypeGoAway))
}

// TestAppendGoAway_Grace: the grace on the wire is whole milliseconds,
// rounded up so the peer's bound is never early, and clamped.
func TestAppendGoAway_Grace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		want  time.Duration
	}{
		{name: "negative", grace: -time.Second, want: 0},
		{name: "zero", grace: 0, want: 0},
		{name: "one ns", grace: 1, want: time.Millisecond},
		{name: "whole ms", grace: 5 * time.Second, want: 5 * time.Second},
		{name: "rounded up", grace: 5*time.Second + 1, want: 5*time.Second + time.Millisecond},
		{name: "just below max", grace: frame.MaxGrace - 1, want: frame.MaxGrace},
		{name: "max", grace: frame.MaxGrace, want: frame.MaxGrace},
		{name: "past max", grace: frame.MaxGrace + time.Hour, want: frame.MaxGrace},
		{name: "huge", grace: math.MaxInt64, want: frame.MaxGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, err := frame.Parse(frame.AppendGoAway(nil, frame.CodeShutdown, 3, tc.grace, "bye"), frame.DefaultMax)
			require.NoError(t, err)
			assert.Equal(t, tc.want, f.Grace)
			assert.Equal(t, frame.Frame{Type: frame.TypeGoAway, Code: frame.CodeShutdown, Seq: 3, Grace: tc.want, Reason: []byte("bye")}, f)
		})
	}
	assert.Equal(t, "goaway", frame.TypeGoAway.String())
	assert.Equal(t, "type(7)", frame.Type(7).String())
}

func TestAppendClose_CutsLongReasonAtRune(t *testing.T) {
	reason := strings.Repeat("é", 200) // 400 bytes
	f, _, err := frame.Parse(frame.AppendClose(nil, frame.CodeProtocol, reason), frame.DefaultMax)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(f.Reason), frame.MaxReasonLen)
	assert.Equal(t, strings.Repeat("é", frame.MaxReasonLen/2), string(f.Reason))
	assert.Equal(t, "protocol_error", f.Code.String())
	assert.Equal(t, "code(99)", frame.Code(99).String())

	g, _, err := frame.Parse(frame.AppendGoAway(nil, frame.CodeShutdown, 1, time.Second, reason), frame.DefaultMax)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("é", frame.MaxReasonLen/2), string(g.Reason))
}

// FuzzParse: Parse never panics, never reads past what it reports, and what
// it accepts re-encodes to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(frame.AppendData(nil, 3, []byte("abc")))
	f.Add(frame.AppendClose(nil, frame.CodeIdle, "x"))
	f.Add(frame.AppendPing(nil, 9))
	f.Add(frame.AppendGoAway(nil, frame.CodeMaxAge, 4, 2*time.Second, "max age"))
	f.Fuzz(func(t *testing.T, buf []byte) {
		fr, n, err := frame.Parse(buf, 1<<12)
		if err != nil {
			require.Zero(t, n)
			return
		}
		require.LessOrEqual(t, n, len(buf))
		var re []byte
		switch fr.Type {
		case frame.TypeData:
			re = frame.AppendData(nil, fr.Seq, fr.Payload)
		case frame.TypeAck:
			re = frame.AppendAck(nil, fr.Seq)
		case frame.TypePing:
			re = frame.AppendPing(nil, fr.Nonce)
		case frame.TypePong:
			re = frame.AppendPong(nil, fr.Nonce)
		case frame.TypeClose:
			re = frame.AppendClose(nil, fr.Code, string(fr.Reason))
		case frame.TypeGoAway:
			re = frame.AppendGoAway(nil, fr.Code, fr.Seq, fr.Grace, string(fr.Reason))
		default:
			t.Fatalf("Parse accepted type %v", fr.Type)
		}
		require.Equal(t, buf[:n], re)
	})
}
