package main

import (
	"flag"
	"fmt"
	"slices"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// This file holds the harness's side of a server behind a balancer: -proxy
// makes every connection start with a PROXY header naming a client of its
// own, and the sourceflood scenario floods from one of them.

// edgeOptions are the flags of the PROXY protocol and the per-source limit.
type edgeOptions struct {
	proxyVersion, proxyClients string
	// maxConnsPerSource is the server's per-source limit (0: none known;
	// the embedded server: none).
	maxConnsPerSource int
}

// defaultProxyClients is -proxy-clients' default: the block set aside for
// benchmarks (RFC 2544), which no real client has.
const defaultProxyClients = "198.18.0.0/15"

func edgeFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.edge.proxyVersion, "proxy", "", "the PROXY protocol `version`, v1 or v2: start every connection with a PROXY protocol header naming a client of its own from\n"+
		"-proxy-clients, as a balancer would (the server must require the PROXY protocol from this host)")
	fs.StringVar(&o.edge.proxyClients, "proxy-clients", defaultProxyClients, "the `prefix` -proxy's clients come from: an IPv4 address each, or an IPv6 /64 each; the first is\n"+
		"sourceflood's flooding source")
	fs.IntVar(&o.edge.maxConnsPerSource, "max-conns-per-source", 0, "the server's per-source connection limit (0: none): the embedded netwheel server's MaxConnsPerSource,\n"+
		"or what -addr's server enforces; sourceflood needs it")
	o.hostileConns[scenario.Sourceflood] = fs.Int("sourceflood-conns", 0, "sourceflood: connections the flooding source opens at once and holds (default -max-conns-per-source + 200);\n"+
		"-conns other sources connect meanwhile")
}

// checkEdge validates the edge flags and fills in the defaults that
// depend on others (set: the flags given).
func checkEdge(o *options, set map[string]bool) error {
	e := &o.edge
	p, err := attack.ParseProxy(e.proxyVersion, e.proxyClients)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	o.Proxy = p
	if set["proxy-clients"] && p.Version == 0 {
		return fmt.Errorf("%w: -proxy-clients needs -proxy v1 or v2", errUsage)
	}
	if !slices.Contains(o.Scenarios, scenario.Sourceflood) {
		return nil
	}
	if why := notApplicable(o, scenario.Sourceflood); why != "" {
		return fmt.Errorf("%w: %s", errUsage, why)
	}
	return floodBeyond(o.hostileConns[scenario.Sourceflood], "sourceflood-conns", e.maxConnsPerSource, "max-conns-per-source", set)
}
