package netserver_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
)

func TestConfig_edgeSettings(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name    string
		cfg     netserver.Config
		wantErr string // "" for a valid config
	}{
		{name: "defaults", cfg: netserver.Config{}},
		{name: "required from trusted proxies", cfg: netserver.Config{ProxyProtocol: netserver.ProxyRequired, TrustedProxies: trusted}},
		{name: "required without trusted proxies", cfg: netserver.Config{ProxyProtocol: netserver.ProxyRequired},
			wantErr: "ProxyProtocol required needs TrustedProxies"},
		{name: "trusted proxies with the protocol off", cfg: netserver.Config{TrustedProxies: trusted},
			wantErr: "TrustedProxies is set but ProxyProtocol is off"},
		{name: "an invalid prefix", cfg: netserver.Config{ProxyProtocol: netserver.ProxyRequired, TrustedProxies: []netip.Prefix{{}}},
			wantErr: "is not a valid prefix"},
		{name: "an unknown mode", cfg: netserver.Config{ProxyProtocol: 7}, wantErr: "want ProxyOff or ProxyRequired"},
		{name: "per-source limit off", cfg: netserver.Config{MaxConnsPerSource: netserver.Off}},
		{name: "per-source limit -2", cfg: netserver.Config{MaxConnsPerSource: -2}, wantErr: "MaxConnsPerSource -2"},
		{name: "IPv4 bits 33", cfg: netserver.Config{SourceIPv4Bits: 33}, wantErr: "SourceIPv4Bits 33"},
		{name: "IPv4 bits off", cfg: netserver.Config{SourceIPv4Bits: netserver.Off}, wantErr: "it cannot be off"},
		{name: "IPv6 bits 129", cfg: netserver.Config{SourceIPv6Bits: 129}, wantErr: "SourceIPv6Bits 129"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Addr = "127.0.0.1:0"
			_, err := netserver.New(tt.cfg, netserver.Echo{})
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, netserver.ErrConfig)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	c, err := netserver.Config{}.WithDefaults()
	require.NoError(t, err)
	assert.Equal(t, 32, c.SourceIPv4Bits)
	assert.Equal(t, 64, c.SourceIPv6Bits)
	assert.Zero(t, c.MaxConnsPerSource, "decided at Start, from MaxConns")
}

func TestMaxConnsPerSource_default(t *testing.T) {
	tests := []struct {
		name          string
		cfg, maxConns int
		want          int
	}{
		{name: "a tenth of MaxConns", maxConns: 19900, want: 1990},
		{name: "at least one", maxConns: 5, want: 1},
		{name: "MaxConns unbounded", maxConns: 0, want: netserver.DefaultMaxConnsPerSource},
		{name: "set", cfg: 50, maxConns: 19900, want: 50},
		{name: "off", cfg: netserver.Off, maxConns: 19900, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, netserver.MaxConnsPerSource(tt.cfg, tt.maxConns))
		})
	}
}

func TestParseProxyMode(t *testing.T) {
	for s, want := range map[string]netserver.ProxyMode{"off": netserver.ProxyOff, "required": netserver.ProxyRequired} {
		got, err := netserver.ParseProxyMode(s)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Equal(t, s, got.String())
	}
	_, err := netserver.ParseProxyMode("on")
	assert.ErrorIs(t, err, netserver.ErrConfig)
}
