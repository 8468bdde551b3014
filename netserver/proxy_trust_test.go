package netserver_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netwheel/netwheel/netserver"
)

// TestProxy_TrustedIPv4Mapped: a trusted prefix written as IPv4-mapped
// IPv6 (as a dual-stack socket shows an IPv4 balancer, ::ffff:10.0.0.5)
// trusts the IPv4 peers it names; PeerAddr gives them as IPv4.
func TestProxy_TrustedIPv4Mapped(t *testing.T) {
	for _, trusted := range []string{"::ffff:127.0.0.1/128", "::ffff:127.0.0.0/104"} {
		t.Run("trusted="+trusted, func(t *testing.T) {
			cfg := proxyCfg(netserver.Raw)
			cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(trusted)}
			h := newWho()
			s := start(t, cfg, h)
			c := dial(t, s)
			client := netip.MustParseAddrPort("192.0.2.3:4000")
			c.Push(append(header(1, client, s.Addr()), "hi"...))
			assert.Equal(t, []byte("hi"), readEcho(t, c, netserver.Raw, 2))
			assert.Zero(t, s.Stats().Closed["proxy_untrusted"])
		})
	}
}
