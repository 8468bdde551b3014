package proxyproto

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
)

// parseV1 parses a version 1 header: b starts with "PROXY ". The line
// ends at the first LF, which must follow a CR and come within MaxV1Len
// bytes.
func parseV1(b []byte) (Header, int, error) {
	end := bytes.IndexByte(b[:min(len(b), MaxV1Len)], '\n')
	switch {
	case end < 0 && len(b) >= MaxV1Len:
		return Header{}, 0, fmt.Errorf("%w: version 1: no CRLF within %d bytes", ErrOversized, MaxV1Len)
	case end < 0:
		return Header{}, 0, ErrIncomplete
	case b[end-1] != '\r':
		return Header{}, 0, fmt.Errorf("%w: version 1: LF without CR", ErrMalformed)
	}
	n := end + 1
	line := b[len(v1Sig) : end-1]
	proto, rest, _ := bytes.Cut(line, []byte{' '})
	h := Header{Version: 1, Command: Proxy}
	switch string(proto) {
	case "UNKNOWN":
		// The rest of the line, if any, is to be ignored.
		return h, n, nil
	case "TCP4", "TCP6":
	default:
		return Header{}, 0, fmt.Errorf("%w: version 1: protocol %q: want TCP4, TCP6 or UNKNOWN", ErrMalformed, proto)
	}
	var f [4][]byte
	for i := range f {
		var ok bool
		f[i], rest, ok = bytes.Cut(rest, []byte{' '})
		if ok != (i < len(f)-1) {
			return Header{}, 0, fmt.Errorf("%w: version 1: want 4 fields after %s, separated by single spaces", ErrMalformed, proto)
		}
	}
	six := proto[3] == '6'
	src, err1 := parseV1Addr(f[0], six)
	dst, err2 := parseV1Addr(f[1], six)
	sport, err3 := parseV1Port(f[2])
	dport, err4 := parseV1Port(f[3])
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return Header{}, 0, fmt.Errorf("%w: version 1 %s: %v", ErrMalformed, proto, err)
		}
	}
	h.Source = netip.AddrPortFrom(src, sport)
	h.Dest = netip.AddrPortFrom(dst, dport)
	return h, n, nil
}

// parseV1Addr parses an IPv4 address in dotted-quad form (six false) or
// an IPv6 address without a zone (six true).
func parseV1Addr(b []byte, six bool) (netip.Addr, error) {
	a, err := netip.ParseAddr(string(b))
	switch {
	case err != nil:
		return netip.Addr{}, err
	case six && (!a.Is6() || a.Zone() != ""):
		return netip.Addr{}, fmt.Errorf("%q is not an IPv6 address without a zone", b)
	case !six && !a.Is4():
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 address", b)
	}
	return a, nil
}

// parseV1Port parses a port: a decimal number in [0, 65535], without sign
// or leading zeros.
func parseV1Port(b []byte) (uint16, error) {
	if len(b) == 0 || len(b) > 5 || (b[0] == '0' && len(b) > 1) {
		return 0, fmt.Errorf("port %q: want a decimal number in [0, 65535] without leading zeros", b)
	}
	v := 0
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, fmt.Errorf("port %q: want a decimal number in [0, 65535] without leading zeros", b)
		}
		v = v*10 + int(d-'0')
	}
	if v > 65535 {
		return 0, fmt.Errorf("port %q: want a decimal number in [0, 65535] without leading zeros", b)
	}
	return uint16(v), nil
}

// AppendV1 appends a version 1 header saying that a client at src
// connected to dst: "PROXY TCP4 ..." or "PROXY TCP6 ...", by src's family
// (an IPv4-mapped IPv6 address counts as IPv4, and dst is written in src's
// family), or "PROXY UNKNOWN" if src is not valid.
func AppendV1(b []byte, src, dst netip.AddrPort) []byte {
	if !src.IsValid() {
		return append(b, "PROXY UNKNOWN\r\n"...)
	}
	s, d := src.Addr().Unmap(), inFamily(dst.Addr(), src.Addr().Unmap().Is4())
	proto := "TCP6"
	if s.Is4() {
		proto = "TCP4"
	}
	b = append(b, "PROXY "...)
	b = append(b, proto...)
	b = append(b, ' ')
	b = s.AppendTo(b)
	b = append(b, ' ')
	b = d.AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(src.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(dst.Port()), 10)
	return append(b, "\r\n"...)
}

// inFamily returns a as an IPv4 address (four true; the unspecified one
// if a has none) or as an IPv6 address.
func inFamily(a netip.Addr, four bool) netip.Addr {
	a = a.Unmap().WithZone("")
	switch {
	case four && a.Is4():
		return a
	case four:
		return netip.IPv4Unspecified()
	case !a.IsValid():
		return netip.IPv6Unspecified()
	}
	return netip.AddrFrom16(a.As16())
}
