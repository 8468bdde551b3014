package proxyproto

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Version 2's address families with their transports (byte 14), and the
// size of the address block each has.
const (
	famUnspec = 0x00
	famInet   = 0x10
	famInet6  = 0x20
	famUnix   = 0x30

	transStream = 0x01
	transDgram  = 0x02

	inetLen  = 4 + 4 + 2 + 2
	inet6Len = 16 + 16 + 2 + 2
	unixLen  = 108 + 108
)

// parseV2 parses a version 2 header: b starts with its signature.
func parseV2(b []byte) (Header, int, error) {
	if len(b) < v2Fixed {
		return Header{}, 0, ErrIncomplete
	}
	ver, cmd, famTrans := b[12]>>4, b[12]&0x0f, b[13]
	if ver != 2 {
		return Header{}, 0, fmt.Errorf("%w: version %d", ErrUnsupported, ver)
	}
	if cmd > 1 {
		return Header{}, 0, fmt.Errorf("%w: command %d", ErrUnsupported, cmd)
	}
	n := v2Fixed + int(binary.BigEndian.Uint16(b[14:16]))
	if n > MaxV2Len {
		return Header{}, 0, fmt.Errorf("%w: version 2: %d bytes, at most %d", ErrOversized, n, MaxV2Len)
	}
	addrLen := 0
	if cmd == 1 {
		switch famTrans {
		case famUnspec:
		case famInet | transStream, famInet | transDgram:
			addrLen = inetLen
		case famInet6 | transStream, famInet6 | transDgram:
			addrLen = inet6Len
		case famUnix | transStream, famUnix | transDgram:
			addrLen = unixLen
		default:
			return Header{}, 0, fmt.Errorf("%w: family and transport 0x%02x", ErrUnsupported, famTrans)
		}
		if n-v2Fixed < addrLen {
			return Header{}, 0, fmt.Errorf("%w: version 2: %d bytes after the fixed part, below the %d of its address block",
				ErrMalformed, n-v2Fixed, addrLen)
		}
	}
	if len(b) < n {
		return Header{}, 0, ErrIncomplete
	}
	h := Header{Version: 2}
	if cmd == 0 || famTrans == famUnspec {
		// LOCAL: the connection's own endpoints stand and the block is
		// discarded, family included; AF_UNSPEC: its addresses are to be
		// ignored.
		if cmd == 0 {
			h.Command = Local
		}
		return h, n, nil
	}
	body := b[v2Fixed:n]
	switch famTrans & 0xf0 {
	case famInet:
		h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[0:4])), binary.BigEndian.Uint16(body[8:10]))
		h.Dest = netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[4:8])), binary.BigEndian.Uint16(body[10:12]))
	case famInet6:
		h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(body[0:16])), binary.BigEndian.Uint16(body[32:34]))
		h.Dest = netip.AddrPortFrom(netip.AddrFrom16([16]byte(body[16:32])), binary.BigEndian.Uint16(body[34:36]))
	}
	tlvs := body[addrLen:]
	for t := tlvs; len(t) > 0; {
		if len(t) < 3 {
			return Header{}, 0, fmt.Errorf("%w: version 2: a TLV cut in its type and length", ErrMalformed)
		}
		l := 3 + int(binary.BigEndian.Uint16(t[1:3]))
		if l > len(t) {
			return Header{}, 0, fmt.Errorf("%w: version 2: TLV 0x%02x of %d bytes overruns the header", ErrMalformed, t[0], l-3)
		}
		t = t[l:]
	}
	if len(tlvs) > 0 {
		h.TLVs = tlvs
	}
	return h, n, nil
}

// AppendV2 appends a version 2 header: with cmd Local, a LOCAL header
// (AF_UNSPEC, no address); with Proxy, one saying that a client at src
// connected to dst over TCP, as AF_INET if src is IPv4 (or IPv4-mapped;
// dst is written in src's family) and AF_INET6 otherwise, or AF_UNSPEC if
// src is not valid. tlvs, raw TLVs, follow the addresses.
func AppendV2(b []byte, cmd Command, src, dst netip.AddrPort, tlvs []byte) []byte {
	b = append(b, v2Sig...)
	famTrans, addrLen := byte(famUnspec), 0
	s := src.Addr().Unmap()
	switch {
	case cmd == Local || !src.IsValid():
	case s.Is4():
		famTrans, addrLen = famInet|transStream, inetLen
	default:
		famTrans, addrLen = famInet6|transStream, inet6Len
	}
	verCmd := byte(0x21)
	if cmd == Local {
		verCmd = 0x20
	}
	b = append(b, verCmd, famTrans)
	b = binary.BigEndian.AppendUint16(b, uint16(addrLen+len(tlvs)))
	switch addrLen {
	case inetLen:
		d := inFamily(dst.Addr(), true)
		b = append(b, s.AsSlice()...)
		b = append(b, d.AsSlice()...)
	case inet6Len:
		s16, d16 := s.As16(), inFamily(dst.Addr(), false).As16()
		b = append(b, s16[:]...)
		b = append(b, d16[:]...)
	}
	if addrLen > 0 {
		b = binary.BigEndian.AppendUint16(b, src.Port())
		b = binary.BigEndian.AppendUint16(b, dst.Port())
	}
	return append(b, tlvs...)
}

// AppendTLV appends one TLV, for AppendV2's tlvs. value must be shorter
// than 64 KiB.
func AppendTLV(b []byte, typ byte, value []byte) []byte {
	b = append(b, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
	return append(b, value...)
}
