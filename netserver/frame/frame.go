// Package frame is netwheel's length-prefixed framed protocol
// (docs/protocol.md) for Go programs: the codec netserver and the load-test
// harness use, a Decoder that splits a byte stream into frames whatever its
// segmentation, and Conn, a small client.
//
// The codec's functions are pure and allocation-free: encoders append to a
// caller's buffer, and Parse returns a Frame whose Payload aliases the
// input.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Type is a frame type.
type Type uint8

// Frame types.
const (
	TypeData  Type = 1 // seq, payload: application data, acknowledged by the peer
	TypeAck   Type = 2 // seq: cumulative, every Data with sequence <= seq arrived
	TypePing  Type = 3 // nonce: asks for a Pong with the same nonce
	TypePong  Type = 4 // nonce: answers a Ping
	TypeClose Type = 5 // code, reason: the sender is closing the connection
	// TypeGoAway is the notice that the sender is going away: code, grace,
	// last, reason. It starts nothing new, finishes what is in flight and
	// sends the final CLOSE within the grace (docs/protocol.md).
	TypeGoAway Type = 6
)

var typeNames = [...]string{TypeData: "data", TypeAck: "ack", TypePing: "ping", TypePong: "pong", TypeClose: "close", TypeGoAway: "goaway"}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Sizes of the wire format.
const (
	LenSize        = 4              // the length prefix
	HeaderSize     = LenSize + 1    // length prefix and type
	DataHeaderSize = HeaderSize + 8 // and sequence number
	MaxReasonLen   = 256            // longest Close reason, in bytes
	DefaultMax     = 64 << 10       // default largest frame (length field value)
	controlLen     = 1 + 8          // length field of Ack, Ping, Pong
	closeMinLen    = 1 + 2          // length field of a Close without reason
	goAwayMinLen   = 1 + 2 + 4 + 8  // length field of a GoAway without reason

	// MaxGrace is the longest grace a GoAway can carry: its field counts
	// whole milliseconds in 32 bits (about 49.7 days).
	MaxGrace = math.MaxUint32 * time.Millisecond
)

// Code says why a connection is closed, in Close frames.
type Code uint16

// Close codes.
const (
	CodeNormal        Code = 1  // orderly close, by either side
	CodeShutdown      Code = 2  // the server is shutting down
	CodeIdle          Code = 3  // no application activity for the idle timeout
	CodeDeadPeer      Code = 4  // keepalive probes went unanswered / read silence
	CodeFrameDeadline Code = 5  // a frame did not complete in time (slowloris)
	CodeHandshake     Code = 6  // no first frame in time
	CodeMaxAge        Code = 7  // the connection reached its maximum age
	CodeWriteStall    Code = 8  // the peer did not read what we sent
	CodeGiveUp        Code = 9  // retransmission gave up
	CodeProtocol      Code = 10 // malformed frame, unknown type, bad sequence
	CodeTooLarge      Code = 11 // a frame longer than the limit
	CodeOverload      Code = 12 // too many connections
	CodeInternal      Code = 13 // the server's handler failed
	CodeOutputLimit   Code = 14 // the peer let too much output queue up (it does not read)
	CodeUnackedLimit  Code = 15 // the peer left too much data unacknowledged
	CodePingFlood     Code = 16 // the peer sent PINGs too fast
	CodeSourceLimit   Code = 17 // the peer's source holds as many connections as one source may
	CodeProxyHeader   Code = 18 // the PROXY protocol header was missing, invalid, too long or from an untrusted peer
)

var codeNames = [...]string{
	CodeNormal: "normal", CodeShutdown: "shutdown", CodeIdle: "idle", CodeDeadPeer: "dead_peer",
	CodeFrameDeadline: "frame_deadline", CodeHandshake: "handshake", CodeMaxAge: "max_age",
	CodeWriteStall: "write_stall", CodeGiveUp: "retransmit_give_up", CodeProtocol: "protocol_error",
	CodeTooLarge: "frame_too_large", CodeOverload: "overload", CodeInternal: "internal_error",
	CodeOutputLimit: "output_limit", CodeUnackedLimit: "unacked_limit", CodePingFlood: "ping_flood",
	CodeSourceLimit: "source_limit", CodeProxyHeader: "proxy_header",
}

func (c Code) String() string {
	if int(c) < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Errors from Parse. ErrShort is not a protocol error: more bytes are needed.
var (
	ErrShort     = errors.New("frame: incomplete frame")
	ErrTooLarge  = errors.New("frame: frame too large")
	ErrMalformed = errors.New("frame: malformed frame")
	ErrType      = errors.New("frame: unknown frame type")
)

// Frame is a decoded frame. Payload and Reason alias the parsed buffer.
type Frame struct {
	Type    Type
	Seq     uint64        // Data, Ack; GoAway: the last DATA the sender had sent
	Nonce   uint64        // Ping, Pong
	Code    Code          // Close, GoAway
	Grace   time.Duration // GoAway: the longest wait for the final CLOSE, whole milliseconds
	Reason  []byte        // Close, GoAway
	Payload []byte        // Data
}

// Parse decodes the first frame in buf, whose length field may be at most
// max. It returns the frame and the number of bytes it used. ErrShort means
// more bytes are needed (Need tells how many in all); any other error is a
// protocol violation and the connection should be closed.
func Parse(buf []byte, max int) (f Frame, n int, err error) {
	if len(buf) < LenSize {
		return Frame{}, 0, ErrShort
	}
	l := binary.BigEndian.Uint32(buf)
	if l == 0 {
		return Frame{}, 0, ErrMalformed
	}
	if uint64(l) > uint64(max) {
		return Frame{}, 0, ErrTooLarge
	}
	total := LenSize + int(l)
	if len(buf) < total {
		return Frame{}, 0, ErrShort
	}
	body := buf[HeaderSize:total]
	f.Type = Type(buf[LenSize])
	switch f.Type {
	case TypeData:
		if len(body) < 8 {
			return Frame{}, 0, ErrMalformed
		}
		f.Seq = binary.BigEndian.Uint64(body)
		f.Payload = body[8:]
	case TypeAck, TypePing, TypePong:
		if len(body) != 8 {
			return Frame{}, 0, ErrMalformed
		}
		v := binary.BigEndian.Uint64(body)
		if f.Type == TypeAck {
			f.Seq = v
		} else {
			f.Nonce = v
		}
	case TypeClose:
		if len(body) < 2 || len(body)-2 > MaxReasonLen || !utf8.Valid(body[2:]) {
			return Frame{}, 0, ErrMalformed
		}
		f.Code = Code(binary.BigEndian.Uint16(body))
		f.Reason = body[2:]
	case TypeGoAway:
		const fixed = goAwayMinLen - 1
		if len(body) < fixed || len(body)-fixed > MaxReasonLen || !utf8.Valid(body[fixed:]) {
			return Frame{}, 0, ErrMalformed
		}
		f.Code = Code(binary.BigEndian.Uint16(body))
		f.Grace = time.Duration(binary.BigEndian.Uint32(body[2:])) * time.Millisecond
		f.Seq = binary.BigEndian.Uint64(body[6:])
		f.Reason = body[fixed:]
	default:
		return Frame{}, 0, ErrType
	}
	return f, total, nil
}

// Need reports the total size of the frame starting at buf, or 0 if the
// length prefix is not complete yet.
func Need(buf []byte) int {
	if len(buf) < LenSize {
		return 0
	}
	return LenSize + int(binary.BigEndian.Uint32(buf))
}

// AppendData appends a Data frame.
func AppendData(dst []byte, seq uint64, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+8+len(payload)))
	dst = append(dst, byte(TypeData))
	dst = binary.BigEndian.AppendUint64(dst, seq)
	return append(dst, payload...)
}

// AppendAck appends a cumulative Ack for every Data up to seq.
func AppendAck(dst []byte, seq uint64) []byte { return appendControl(dst, TypeAck, seq) }

// AppendPing appends a Ping.
func AppendPing(dst []byte, nonce uint64) []byte { return appendControl(dst, TypePing, nonce) }

// AppendPong appends a Pong.
func AppendPong(dst []byte, nonce uint64) []byte { return appendControl(dst, TypePong, nonce) }

func appendControl(dst []byte, t Type, v uint64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, controlLen)
	dst = append(dst, byte(t))
	return binary.BigEndian.AppendUint64(dst, v)
}

// AppendClose appends a Close; a reason longer than MaxReasonLen is cut at a
// rune boundary.
func AppendClose(dst []byte, code Code, reason string) []byte {
	reason = cutReason(reason)
	dst = binary.BigEndian.AppendUint32(dst, uint32(closeMinLen+len(reason)))
	dst = append(dst, byte(TypeClose))
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, reason...)
}

// AppendGoAway appends a GoAway: the sender is going away for code
// (CodeShutdown, CodeMaxAge), last is the sequence number of the last DATA
// it has sent (0 for none), and it sends the final CLOSE at most grace
// from now. The grace is rounded up to whole milliseconds, so the peer's
// bound is never early, and clamped to [0, MaxGrace]. A reason longer than
// MaxReasonLen is cut at a rune boundary.
func AppendGoAway(dst []byte, code Code, last uint64, grace time.Duration, reason string) []byte {
	reason = cutReason(reason)
	graceMillis := uint32(math.MaxUint32)
	switch {
	case grace <= 0:
		graceMillis = 0
	case grace < MaxGrace:
		graceMillis = uint32((grace + time.Millisecond - 1) / time.Millisecond)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(goAwayMinLen+len(reason)))
	dst = append(dst, byte(TypeGoAway))
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	dst = binary.BigEndian.AppendUint32(dst, graceMillis)
	dst = binary.BigEndian.AppendUint64(dst, last)
	return append(dst, reason...)
}

// cutReason cuts a reason longer than MaxReasonLen at a rune boundary.
func cutReason(reason string) string {
	if len(reason) > MaxReasonLen {
		cut := MaxReasonLen
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	return reason
}
