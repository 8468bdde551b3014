// Package proxyproto reads and writes the PROXY protocol header (versions 1
// and 2, HAProxy's doc/proxy-protocol.txt) that a TCP load balancer puts
// before a connection's first byte to say who the client is.
//
// Parse is pure and never blocks: it looks at the bytes a connection has
// received so far and says whether they hold a whole header, need more, or
// can never be one. An event loop calls it again as bytes arrive, so a
// header cut anywhere, or sent a byte at a time, parses the same, and the
// connection's handshake deadline bounds how long it may take. The encoders
// (AppendV1, AppendV2) are for test harnesses playing a balancer.
//
// Do not use it on a connection from a peer you do not trust to be your
// balancer: anyone can write a header, and the address it names is only as
// true as the peer that wrote it.
package proxyproto

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Errors of Parse; test them with errors.Is. ErrIncomplete is returned as
// it is (never wrapped), so that the caller's fast path is a comparison.
var (
	// ErrIncomplete: the bytes so far are the start of a header, or could
	// be; call Parse again when more have arrived.
	ErrIncomplete = errors.New("proxyproto: incomplete header")
	// ErrNoHeader: the first bytes are not a PROXY header of either
	// version (the peer did not send one).
	ErrNoHeader = errors.New("proxyproto: no PROXY header")
	// ErrMalformed: a header that breaks the specification.
	ErrMalformed = errors.New("proxyproto: malformed header")
	// ErrOversized: a version 1 line longer than MaxV1Len, or a version 2
	// header longer than MaxV2Len.
	ErrOversized = errors.New("proxyproto: header too long")
	// ErrUnsupported: a version 2 header of a version, command, address
	// family or transport the specification does not define (a receiver
	// must drop it).
	ErrUnsupported = errors.New("proxyproto: unsupported version, command, family or transport")
)

// Sizes of headers.
const (
	// MaxV1Len is the longest version 1 header, its CRLF included, as the
	// specification bounds it.
	MaxV1Len = 107
	// MaxV2Len is the longest version 2 header Parse accepts: 16 bytes of
	// fixed part, the address block (216 bytes at most, for AF_UNIX) and
	// TLVs. The specification allows 64 KiB; real balancers' TLVs (ALPN,
	// SNI of 255 bytes at most, a unique ID of 128, a cloud's endpoint ID,
	// a CRC) fit well within this, and a receiver buffers the whole header
	// before it can parse it, so the bound is its memory per connection.
	MaxV2Len = 2048
	// v2Fixed is the size of version 2's fixed part: signature, version
	// and command, family and transport, length.
	v2Fixed = 16
)

// v1Sig and v2Sig start a version 1 and a version 2 header.
var (
	v1Sig = []byte("PROXY ")
	v2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// Command is what a header says of the connection.
type Command uint8

const (
	// Proxy: the connection was relayed for a client; Source says which
	// (when the header gives an address).
	Proxy Command = iota
	// Local: the balancer opened the connection itself (a health check,
	// version 2 only); the connection's own endpoints stand.
	Local
)

// Header is a parsed PROXY header.
type Header struct {
	// Version is 1 or 2.
	Version int
	// Command is Proxy, or Local (version 2).
	Command Command
	// Source and Dest are the client's address and the address it
	// connected to, as the balancer saw them. They are the zero AddrPort
	// (not IsValid) when the header gives no IP address: a Local command,
	// version 1 UNKNOWN, version 2 AF_UNSPEC or AF_UNIX; the connection's
	// own endpoints then stand.
	Source, Dest netip.AddrPort
	// TLVs are version 2's type-length-value fields after the address
	// block, validated but not interpreted: a slice of Parse's input,
	// valid as long as that is. Range over them with EachTLV.
	TLVs []byte
}

// Parse parses the PROXY header at the start of b, the bytes a connection
// has received so far. It returns the header and its length n (the
// connection's own data starts at b[n]), or ErrIncomplete when b could be
// the start of a header and more bytes are needed, or an error wrapping
// ErrNoHeader, ErrMalformed, ErrOversized or ErrUnsupported when no bytes
// to come can make b a valid header. The answer for any prefix of a stream
// is either ErrIncomplete or the answer for the whole stream: an event
// loop may call it on every read. O(len of the header), allocation-free
// but for an error's message; any goroutine.
func Parse(b []byte) (Header, int, error) {
	if len(b) == 0 {
		return Header{}, 0, ErrIncomplete
	}
	switch b[0] {
	case v1Sig[0]:
		if err := matchSig(b, v1Sig); err != nil {
			return Header{}, 0, err
		}
		return parseV1(b)
	case v2Sig[0]:
		if err := matchSig(b, v2Sig); err != nil {
			return Header{}, 0, err
		}
		return parseV2(b)
	}
	return Header{}, 0, ErrNoHeader
}

// matchSig returns nil if b starts with sig, ErrIncomplete if b is a
// shorter prefix of it, and ErrNoHeader otherwise.
func matchSig(b, sig []byte) error {
	n := min(len(b), len(sig))
	if string(b[:n]) != string(sig[:n]) {
		return ErrNoHeader
	}
	if n < len(sig) {
		return ErrIncomplete
	}
	return nil
}

// EachTLV calls f with each TLV of tlvs (Header.TLVs), in order, until f
// returns false. A value is a slice of tlvs. O(len(tlvs)); allocation-free.
func EachTLV(tlvs []byte, f func(typ byte, value []byte) bool) {
	for len(tlvs) >= 3 {
		n := int(binary.BigEndian.Uint16(tlvs[1:3]))
		if 3+n > len(tlvs) {
			return // Parse validated them; a hand-made slice may be cut
		}
		if !f(tlvs[0], tlvs[3:3+n]) {
			return
		}
		tlvs = tlvs[3+n:]
	}
}
