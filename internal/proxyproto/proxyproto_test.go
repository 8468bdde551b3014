package proxyproto_test

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/proxyproto"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// sig2 is version 2's signature, in hex.
const sig2 = "0d0a0d0a000d0a515549540a"

func TestParse_specCases(t *testing.T) {
	tests := []struct {
		name     string
		in       string // text, or hex after "hex:"
		want     proxyproto.Header
		wantN    int
		wantErr  error
		trailing string // appended after the header: must not change the answer
	}{
		{name: "v1 tcp4", in: "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n",
			want: proxyproto.Header{Version: 1, Source: ap("192.0.2.1:56324"), Dest: ap("198.51.100.2:443")}, wantN: 45},
		{name: "v1 tcp6", in: "PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n",
			want: proxyproto.Header{Version: 1, Source: ap("[2001:db8::1]:1"), Dest: ap("[2001:db8::2]:65535")}, wantN: 44},
		{name: "v1 tcp4 largest", in: "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n",
			want: proxyproto.Header{Version: 1, Source: ap("255.255.255.255:65535"), Dest: ap("255.255.255.255:65535")}, wantN: 56},
		{name: "v1 tcp6 longest is 104 bytes",
			in: "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
			want: proxyproto.Header{Version: 1, Source: ap("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"),
				Dest: ap("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")}, wantN: 104},
		{name: "v1 unknown", in: "PROXY UNKNOWN\r\n", want: proxyproto.Header{Version: 1}, wantN: 15},
		{name: "v1 unknown ignores the rest",
			in: "PROXY UNKNOWN ffff:f::1 ffff:f::2 65535 65535\r\n", want: proxyproto.Header{Version: 1}, wantN: 47},
		{name: "v1 data follows", in: "PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n", trailing: "GET / HTTP/1.1\r\n",
			want: proxyproto.Header{Version: 1, Source: ap("10.0.0.1:1"), Dest: ap("10.0.0.2:2")}, wantN: 34},
		{name: "v1 lf without cr", in: "PROXY TCP4 10.0.0.1 10.0.0.2 1 2\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 two spaces", in: "PROXY TCP4 10.0.0.1  10.0.0.2 1 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 five fields", in: "PROXY TCP4 10.0.0.1 10.0.0.2 1 2 3\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 tcp4 with ipv6", in: "PROXY TCP4 2001:db8::1 10.0.0.2 1 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 tcp6 with ipv4", in: "PROXY TCP6 10.0.0.1 10.0.0.2 1 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 zone", in: "PROXY TCP6 fe80::1%eth0 fe80::2 1 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 port too big", in: "PROXY TCP4 10.0.0.1 10.0.0.2 65536 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 port leading zero", in: "PROXY TCP4 10.0.0.1 10.0.0.2 080 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 port sign", in: "PROXY TCP4 10.0.0.1 10.0.0.2 +80 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 lowercase protocol", in: "PROXY tcp4 10.0.0.1 10.0.0.2 1 2\r\n", wantErr: proxyproto.ErrMalformed},
		{name: "v1 no crlf within 107 bytes", in: "PROXY UNKNOWN " + strings.Repeat("x", 93), wantErr: proxyproto.ErrOversized},
		{name: "v1 crlf at 107 bytes", in: "PROXY UNKNOWN " + strings.Repeat("x", 91) + "\r\n",
			want: proxyproto.Header{Version: 1}, wantN: 107},
		{name: "not a header", in: "GET / HTTP/1.1\r\n", wantErr: proxyproto.ErrNoHeader},
		{name: "proxy without space", in: "PROXYTCP4", wantErr: proxyproto.ErrNoHeader},
		{name: "v2 tcp4", in: "hex:" + sig2 + "21 11 000c c0000201 c6336402 dc04 01bb",
			want: proxyproto.Header{Version: 2, Source: ap("192.0.2.1:56324"), Dest: ap("198.51.100.2:443")}, wantN: 28},
		{name: "v2 udp4", in: "hex:" + sig2 + "21 12 000c c0000201 c6336402 dc04 01bb",
			want: proxyproto.Header{Version: 2, Source: ap("192.0.2.1:56324"), Dest: ap("198.51.100.2:443")}, wantN: 28},
		{name: "v2 tcp6", in: "hex:" + sig2 + "21 21 0024 20010db8000000000000000000000001 20010db8000000000000000000000002 0050 1f90",
			want: proxyproto.Header{Version: 2, Source: ap("[2001:db8::1]:80"), Dest: ap("[2001:db8::2]:8080")}, wantN: 52},
		{name: "v2 tcp4 with tlvs", in: "hex:" + sig2 + "21 11 0017 0a000001 0a000002 0001 0002 01 0002 6832 04 0003 000000",
			trailing: "hello",
			want: proxyproto.Header{Version: 2, Source: ap("10.0.0.1:1"), Dest: ap("10.0.0.2:2"),
				TLVs: []byte{1, 0, 2, 'h', '2', 4, 0, 3, 0, 0, 0}}, wantN: 39},
		{name: "v2 tlv overruns", in: "hex:" + sig2 + "21 11 0010 0a000001 0a000002 0001 0002 01 0002 68", wantErr: proxyproto.ErrMalformed},
		{name: "v2 tlv cut in its length", in: "hex:" + sig2 + "21 11 000e 0a000001 0a000002 0001 0002 01 00", wantErr: proxyproto.ErrMalformed},
		{name: "v2 local", in: "hex:" + sig2 + "20 00 0000", want: proxyproto.Header{Version: 2, Command: proxyproto.Local}, wantN: 16},
		{name: "v2 local discards its block and family", in: "hex:" + sig2 + "20 11 0003 ffffff", trailing: "x",
			want: proxyproto.Header{Version: 2, Command: proxyproto.Local}, wantN: 19},
		{name: "v2 unspec keeps no address", in: "hex:" + sig2 + "21 00 0002 abcd",
			want: proxyproto.Header{Version: 2}, wantN: 18},
		{name: "v2 unix has no ip address", in: "hex:" + sig2 + "21 31 00d8" + strings.Repeat("00", 216),
			want: proxyproto.Header{Version: 2}, wantN: 232},
		{name: "v2 address block short", in: "hex:" + sig2 + "21 11 000b 0a000001 0a000002 0001 00", wantErr: proxyproto.ErrMalformed},
		{name: "v2 version 1 byte", in: "hex:" + sig2 + "11 11 000c", wantErr: proxyproto.ErrUnsupported},
		{name: "v2 version 3", in: "hex:" + sig2 + "31 11 000c", wantErr: proxyproto.ErrUnsupported},
		{name: "v2 command 2", in: "hex:" + sig2 + "22 11 000c", wantErr: proxyproto.ErrUnsupported},
		{name: "v2 family 4", in: "hex:" + sig2 + "21 41 000c", wantErr: proxyproto.ErrUnsupported},
		{name: "v2 inet without transport", in: "hex:" + sig2 + "21 10 000c", wantErr: proxyproto.ErrUnsupported},
		{name: "v2 oversized", in: "hex:" + sig2 + "21 11 07f1", wantErr: proxyproto.ErrOversized},
		{name: "v2 bad signature", in: "hex:0d0a0d0a000d0a515549540b", wantErr: proxyproto.ErrNoHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []byte
			if h, ok := strings.CutPrefix(tt.in, "hex:"); ok {
				in = unhex(t, h)
			} else {
				in = []byte(tt.in)
			}
			in = append(in, tt.trailing...)
			h, n, err := proxyproto.Parse(in)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Zero(t, n)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, h)
				assert.Equal(t, tt.wantN, n)
			}
			// Every cut of the stream is incomplete or the same answer.
			for i := range len(in) {
				ph, pn, perr := proxyproto.Parse(in[:i])
				if perr == proxyproto.ErrIncomplete {
					continue
				}
				require.Equal(t, errors.Is(perr, tt.wantErr) || tt.wantErr == nil && perr == nil, true,
					"prefix of %d bytes: %v", i, perr)
				if perr == nil {
					assert.Equal(t, tt.want, ph)
					assert.Equal(t, tt.wantN, pn)
				}
			}
		})
	}
}

func TestParse_incomplete(t *testing.T) {
	for _, in := range []string{"", "P", "PROXY", "PROXY ", "PROXY TCP4 10.0.0.1", "\r\n\r\n", "\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00"} {
		_, n, err := proxyproto.Parse([]byte(in))
		assert.Same(t, proxyproto.ErrIncomplete, err, "%q", in)
		assert.Zero(t, n)
	}
}

func TestAppend_roundTrip(t *testing.T) {
	tlvs := proxyproto.AppendTLV(proxyproto.AppendTLV(nil, 0x01, []byte("h2")), 0x02, []byte("example.com"))
	tests := []struct {
		name     string
		v2       bool
		cmd      proxyproto.Command
		src, dst netip.AddrPort
		tlvs     []byte
		want     proxyproto.Header
	}{
		{name: "v1 tcp4", src: ap("192.0.2.7:4000"), dst: ap("10.1.1.1:9000"),
			want: proxyproto.Header{Version: 1, Source: ap("192.0.2.7:4000"), Dest: ap("10.1.1.1:9000")}},
		{name: "v1 tcp6 with ipv4 dst", src: ap("[2001:db8::7]:4000"), dst: ap("10.1.1.1:9000"),
			want: proxyproto.Header{Version: 1, Source: ap("[2001:db8::7]:4000"), Dest: ap("[::ffff:10.1.1.1]:9000")}},
		{name: "v1 4in6 src is tcp4", src: ap("[::ffff:192.0.2.7]:4000"), dst: ap("[::1]:9000"),
			want: proxyproto.Header{Version: 1, Source: ap("192.0.2.7:4000"), Dest: ap("0.0.0.0:9000")}},
		{name: "v1 unknown", want: proxyproto.Header{Version: 1}},
		{name: "v2 tcp4", v2: true, src: ap("192.0.2.7:4000"), dst: ap("10.1.1.1:9000"), tlvs: tlvs,
			want: proxyproto.Header{Version: 2, Source: ap("192.0.2.7:4000"), Dest: ap("10.1.1.1:9000"), TLVs: tlvs}},
		{name: "v2 tcp6", v2: true, src: ap("[2001:db8::7]:4000"), dst: ap("[2001:db8::1]:9000"),
			want: proxyproto.Header{Version: 2, Source: ap("[2001:db8::7]:4000"), Dest: ap("[2001:db8::1]:9000")}},
		{name: "v2 local", v2: true, cmd: proxyproto.Local, src: ap("192.0.2.7:4000"),
			want: proxyproto.Header{Version: 2, Command: proxyproto.Local}},
		{name: "v2 unspec", v2: true, want: proxyproto.Header{Version: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			if tt.v2 {
				b = proxyproto.AppendV2([]byte("x"), tt.cmd, tt.src, tt.dst, tt.tlvs)
			} else {
				b = proxyproto.AppendV1([]byte("x"), tt.src, tt.dst)
			}
			require.Equal(t, byte('x'), b[0], "appends")
			h, n, err := proxyproto.Parse(append(b[1:], "data"...))
			require.NoError(t, err)
			assert.Equal(t, len(b)-1, n)
			assert.Equal(t, tt.want, h)
		})
	}
}

func TestEachTLV(t *testing.T) {
	tlvs := proxyproto.AppendTLV(proxyproto.AppendTLV(nil, 0x01, []byte("h2")), 0x04, nil)
	var got []string
	proxyproto.EachTLV(tlvs, func(typ byte, v []byte) bool {
		got = append(got, string(rune('0'+typ))+":"+string(v))
		return true
	})
	assert.Equal(t, []string{"1:h2", "4:"}, got)
	got = got[:0]
	proxyproto.EachTLV(tlvs, func(typ byte, v []byte) bool {
		got = append(got, string(v))
		return false
	})
	assert.Equal(t, []string{"h2"}, got, "stops when f returns false")
	proxyproto.EachTLV(tlvs[:4], func(byte, []byte) bool { t.Fatal("a cut TLV is not given"); return false })
}

func TestParse_allocs(t *testing.T) {
	v2 := proxyproto.AppendV2(nil, proxyproto.Proxy, ap("192.0.2.7:4000"), ap("10.1.1.1:9000"), nil)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := proxyproto.Parse(v2); err != nil {
			t.Fatal(err)
		}
		if _, _, err := proxyproto.Parse(v2[:10]); err != proxyproto.ErrIncomplete {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		in   []byte
	}{
		{"version=1", proxyproto.AppendV1(nil, ap("192.0.2.7:4000"), ap("10.1.1.1:9000"))},
		{"version=2", proxyproto.AppendV2(nil, proxyproto.Proxy, ap("192.0.2.7:4000"), ap("10.1.1.1:9000"), nil)},
		{"version=2/family=inet6", proxyproto.AppendV2(nil, proxyproto.Proxy, ap("[2001:db8::7]:4000"), ap("[2001:db8::1]:9000"), nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := proxyproto.Parse(bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
