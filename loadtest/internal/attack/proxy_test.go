package attack

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/proxyproto"
)

func TestParseProxy(t *testing.T) {
	tests := []struct {
		name, version, clients string
		wantErr                string
		wantSources            uint64
	}{
		{name: "none", version: ""},
		{name: "v2 ipv4", version: "v2", clients: "198.18.0.0/15", wantSources: 1 << 17},
		{name: "v1 ipv6 by /64", version: "v1", clients: "2001:db8::/48", wantSources: 1 << 16},
		{name: "ipv6 within a /64", version: "v1", clients: "2001:db8::/120", wantSources: 256},
		{name: "bad version", version: "v3", clients: "198.18.0.0/15", wantErr: "want v1 or v2"},
		{name: "bad prefix", version: "v2", clients: "198.18.0/15", wantErr: "want a prefix"},
		{name: "one source", version: "v2", clients: "198.18.0.1/32", wantErr: "holds one source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseProxy(tt.version, tt.clients)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.version != "" {
				assert.Equal(t, tt.wantSources, p.Sources())
			}
		})
	}
}

func TestProxy_Clients(t *testing.T) {
	v4, err := ParseProxy("v2", "198.18.0.0/30")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("198.18.0.0"), v4.FloodSource())
	var got []string
	for k := range uint64(4) {
		got = append(got, v4.Client(k).String())
	}
	assert.Equal(t, []string{"198.18.0.1", "198.18.0.2", "198.18.0.3", "198.18.0.1"}, got, "every source but the flooder's, wrapping")

	v6, err := ParseProxy("v1", "2001:db8::/62")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("2001:db8::1"), v6.FloodSource())
	got = got[:0]
	for k := range uint64(4) {
		got = append(got, v6.Client(k).String())
	}
	assert.Equal(t, []string{"2001:db8:0:1::1", "2001:db8:0:2::1", "2001:db8:0:3::1", "2001:db8:0:1::1"}, got, "a /64 each")
}

func TestProxy_header(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	client := netip.MustParseAddr("198.18.0.9")
	for _, v := range []int{1, 2} {
		h, n, err := proxyproto.Parse(Proxy{Version: v}.header(c, client))
		require.NoError(t, err)
		assert.Positive(t, n)
		assert.Equal(t, v, h.Version)
		assert.Equal(t, netip.AddrPortFrom(client, uint16(c.LocalAddr().(*net.TCPAddr).Port)), h.Source)
		assert.Equal(t, ln.Addr().(*net.TCPAddr).AddrPort(), h.Dest)
	}
}
