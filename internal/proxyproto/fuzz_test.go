package proxyproto_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/proxyproto"
)

// errClass names the answer of Parse or of the model, for comparing them.
func errClass(err error) string {
	for _, e := range []error{proxyproto.ErrIncomplete, proxyproto.ErrNoHeader, proxyproto.ErrMalformed,
		proxyproto.ErrOversized, proxyproto.ErrUnsupported} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "ok"
}

// model parses b the plain way, straight from the specification's text:
// whole strings split on spaces for version 1, a field at a time for
// version 2. It is slow and simple; Parse must agree with it.
func model(b []byte) (proxyproto.Header, int, error) {
	const v1, v2 = "PROXY ", "\r\n\r\n\x00\r\nQUIT\n"
	s := string(b)
	switch {
	case strings.HasPrefix(v1, s) && len(s) < len(v1), strings.HasPrefix(v2, s) && len(s) < len(v2):
		return proxyproto.Header{}, 0, proxyproto.ErrIncomplete
	case strings.HasPrefix(s, v1):
		return modelV1(s)
	case strings.HasPrefix(s, v2):
		return modelV2(b)
	}
	return proxyproto.Header{}, 0, proxyproto.ErrNoHeader
}

func modelV1(s string) (proxyproto.Header, int, error) {
	line, _, found := strings.Cut(s, "\n")
	if !found || len(line)+1 > 107 {
		if len(s) >= 107 {
			return proxyproto.Header{}, 0, proxyproto.ErrOversized
		}
		return proxyproto.Header{}, 0, proxyproto.ErrIncomplete
	}
	n := len(line) + 1
	line, ok := strings.CutSuffix(line, "\r")
	if !ok {
		return proxyproto.Header{}, 0, proxyproto.ErrMalformed
	}
	f := strings.Split(line, " ")[1:]
	if f[0] == "UNKNOWN" {
		return proxyproto.Header{Version: 1}, n, nil
	}
	if len(f) != 5 || (f[0] != "TCP4" && f[0] != "TCP6") {
		return proxyproto.Header{}, 0, proxyproto.ErrMalformed
	}
	var addrs [2]netip.Addr
	for i, a := range f[1:3] {
		ip, err := netip.ParseAddr(a)
		if err != nil || (f[0] == "TCP4") != ip.Is4() || ip.Zone() != "" {
			return proxyproto.Header{}, 0, proxyproto.ErrMalformed
		}
		addrs[i] = ip
	}
	var ports [2]uint16
	for i, p := range f[3:5] {
		v, err := strconv.ParseUint(p, 10, 16)
		if err != nil || strconv.FormatUint(v, 10) != p {
			return proxyproto.Header{}, 0, proxyproto.ErrMalformed
		}
		ports[i] = uint16(v)
	}
	return proxyproto.Header{Version: 1, Source: netip.AddrPortFrom(addrs[0], ports[0]),
		Dest: netip.AddrPortFrom(addrs[1], ports[1])}, n, nil
}

func modelV2(b []byte) (proxyproto.Header, int, error) {
	if len(b) < 16 {
		return proxyproto.Header{}, 0, proxyproto.ErrIncomplete
	}
	version, command, family, transport := b[12]>>4, b[12]&15, b[13]>>4, b[13]&15
	length := int(binary.BigEndian.Uint16(b[14:]))
	switch {
	case version != 2 || command > 1:
		return proxyproto.Header{}, 0, proxyproto.ErrUnsupported
	case 16+length > proxyproto.MaxV2Len:
		return proxyproto.Header{}, 0, proxyproto.ErrOversized
	}
	local := command == 0
	sizes := map[byte]int{0: 0, 1: 12, 2: 36, 3: 216}
	size, known := sizes[family]
	if !local && (!known || transport > 2 || (family == 0) != (transport == 0)) {
		return proxyproto.Header{}, 0, proxyproto.ErrUnsupported
	}
	if !local && length < size {
		return proxyproto.Header{}, 0, proxyproto.ErrMalformed
	}
	if len(b) < 16+length {
		return proxyproto.Header{}, 0, proxyproto.ErrIncomplete
	}
	if local {
		return proxyproto.Header{Version: 2, Command: proxyproto.Local}, 16 + length, nil
	}
	if family == 0 {
		return proxyproto.Header{Version: 2}, 16 + length, nil
	}
	h := proxyproto.Header{Version: 2}
	r := bytes.NewReader(b[16 : 16+length])
	switch family {
	case 1:
		var a struct {
			Src, Dst     [4]byte
			SPort, DPort uint16
		}
		_ = binary.Read(r, binary.BigEndian, &a)
		h.Source = netip.AddrPortFrom(netip.AddrFrom4(a.Src), a.SPort)
		h.Dest = netip.AddrPortFrom(netip.AddrFrom4(a.Dst), a.DPort)
	case 2:
		var a struct {
			Src, Dst     [16]byte
			SPort, DPort uint16
		}
		_ = binary.Read(r, binary.BigEndian, &a)
		h.Source = netip.AddrPortFrom(netip.AddrFrom16(a.Src), a.SPort)
		h.Dest = netip.AddrPortFrom(netip.AddrFrom16(a.Dst), a.DPort)
	case 3:
		_, _ = r.Seek(216, 0)
	}
	rest := b[16+size : 16+length]
	for r.Len() > 0 {
		var tl struct {
			Type byte
			Len  uint16
		}
		if binary.Read(r, binary.BigEndian, &tl) != nil || int(tl.Len) > r.Len() {
			return proxyproto.Header{}, 0, proxyproto.ErrMalformed
		}
		_, _ = r.Seek(int64(tl.Len), 1)
	}
	if len(rest) > 0 {
		h.TLVs = rest
	}
	return h, 16 + length, nil
}

// FuzzParse checks Parse against the model on the whole input, and that
// every cut of the stream answers ErrIncomplete or the whole's answer, as
// an event loop reading one byte at a time, or any segmentation, would
// see it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nhello",
		"PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n",
		"PROXY UNKNOWN\r\n",
		"PROXY UNKNOWN whatever\r\n",
		"PROXY TCP4 10.0.0.1 10.0.0.2 080 2\r\n",
		"PROXY TCP4 10.0.0.1 10.0.0.2 1 2\n",
		"GET / HTTP/1.0\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	ap := netip.MustParseAddrPort
	tlvs := proxyproto.AppendTLV(nil, 1, []byte("h2"))
	f.Add(proxyproto.AppendV2(nil, proxyproto.Proxy, ap("192.0.2.1:1"), ap("10.0.0.1:2"), tlvs))
	f.Add(proxyproto.AppendV2(nil, proxyproto.Proxy, ap("[2001:db8::1]:1"), ap("[2001:db8::2]:2"), nil))
	f.Add(proxyproto.AppendV2(nil, proxyproto.Local, netip.AddrPort{}, netip.AddrPort{}, nil))
	f.Add(proxyproto.AppendV2(nil, proxyproto.Proxy, netip.AddrPort{}, netip.AddrPort{}, tlvs))
	f.Add(append(proxyproto.AppendV2(nil, proxyproto.Proxy, ap("192.0.2.1:1"), ap("10.0.0.1:2"), nil), "data"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := proxyproto.Parse(b)
		mh, mn, merr := model(b)
		require.Equal(t, errClass(merr), errClass(err), "%q", b)
		if err == nil {
			require.Equal(t, mn, n)
			require.Equal(t, mh, h)
			require.LessOrEqual(t, n, len(b))
		} else {
			require.Zero(t, n)
		}
		for i := range min(len(b), proxyproto.MaxV2Len+1) {
			ph, pn, perr := proxyproto.Parse(b[:i])
			if perr == proxyproto.ErrIncomplete {
				continue
			}
			require.Equal(t, errClass(err), errClass(perr), "prefix %d of %q", i, b)
			require.Equal(t, n, pn)
			require.Equal(t, h, ph)
		}
	})
}
