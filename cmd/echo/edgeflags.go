package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/netwheel/netwheel/netserver"
)

// edgeFlags declares the flags of the server's edge: the PROXY protocol and
// the per-source limit; num declares a count under the one rule.
func edgeFlags(fs *flag.FlagSet, cfg *netserver.Config, num func(p *int, name string, def int, usage string)) {
	fs.Func("proxy-protocol", "off, or required: every connection comes from -trusted-proxies and starts\nwith a PROXY header, v1 or v2 (HAProxy's send-proxy-v2), naming the client (default off)",
		func(s string) error {
			m, err := netserver.ParseProxyMode(s)
			if err != nil {
				return errors.New("want off or required")
			}
			cfg.ProxyProtocol = m
			return nil
		})
	fs.Var((*prefixes)(&cfg.TrustedProxies), "trusted-proxies", "the balancers' `prefixes`, comma-separated (10.0.0.0/8,2001:db8::/32; an address\nalone is itself), that a PROXY header is accepted from; needs -proxy-protocol required")
	num(&cfg.MaxConnsPerSource, "max-conns-per-source", 0, "most open `connections` per source, the client's address (IPv6 by /64); more\nare closed on arrival (a loopback peer without a PROXY header is not counted).\n0 is a tenth of -max-conns; off is no limit")
	num(&cfg.SourceIPv4Bits, "source-ipv4-bits", netserver.DefaultSourceIPv4Bits, "leading `bits` of an IPv4 client address that name its source")
	num(&cfg.SourceIPv6Bits, "source-ipv6-bits", netserver.DefaultSourceIPv6Bits, "leading `bits` of an IPv6 client address that name its source")
}

// prefixes is a flag.Value for a comma-separated list of netip.Prefix; a
// bare address is the prefix of itself alone.
type prefixes []netip.Prefix

func (p *prefixes) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixes) Set(v string) error {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if x, err := netip.ParsePrefix(f); err == nil {
			out = append(out, x.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return fmt.Errorf("%q is not a prefix such as 10.0.0.0/8 or 2001:db8::/32, nor an address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	*p = out
	return nil
}
