package netserver

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/netwheel/netwheel/internal/proxyproto"
	"github.com/netwheel/netwheel/internal/setting"
	"github.com/netwheel/netwheel/internal/sources"
)

// ProxyMode says whether connections start with a PROXY protocol header
// (Config.ProxyProtocol).
type ProxyMode uint8

const (
	// ProxyOff: connections carry no PROXY header; the client is the peer.
	ProxyOff ProxyMode = iota
	// ProxyRequired: every connection comes from a trusted proxy and starts
	// with a PROXY header, version 1 or 2.
	ProxyRequired
)

var proxyModeNames = [...]string{ProxyOff: "off", ProxyRequired: "required"}

func (m ProxyMode) String() string {
	if int(m) < len(proxyModeNames) {
		return proxyModeNames[m]
	}
	return fmt.Sprintf("proxymode(%d)", uint8(m))
}

// ParseProxyMode parses "off" or "required".
func ParseProxyMode(s string) (ProxyMode, error) {
	if i := slices.Index(proxyModeNames[:], s); i >= 0 {
		return ProxyMode(i), nil
	}
	return 0, fmt.Errorf("%w: PROXY protocol %q: want off or required", ErrConfig, s)
}

// DefaultMaxConnsPerSource is MaxConnsPerSource's default where MaxConns
// has no bound; elsewhere the default is a tenth of MaxConns.
const DefaultMaxConnsPerSource = 10000

// Default source prefixes (Config.SourceIPv4Bits, SourceIPv6Bits).
const (
	DefaultSourceIPv4Bits = 32
	DefaultSourceIPv6Bits = 64
)

// checkEdge checks the PROXY protocol and per-source settings under the
// one rule (internal/setting): zero the default, Off (exactly -1) off
// where a setting can be, any other negative an error.
func (c *Config) checkEdge() error {
	switch c.ProxyProtocol {
	case ProxyOff:
		if len(c.TrustedProxies) > 0 {
			return fmt.Errorf("%w: TrustedProxies is set but ProxyProtocol is off: set ProxyProtocol to ProxyRequired, or drop TrustedProxies", ErrConfig)
		}
	case ProxyRequired:
		if len(c.TrustedProxies) == 0 {
			return fmt.Errorf("%w: ProxyProtocol required needs TrustedProxies, the balancers' prefixes a PROXY header is accepted from", ErrConfig)
		}
		for _, p := range c.TrustedProxies {
			if !p.IsValid() {
				return fmt.Errorf("%w: TrustedProxies: %v is not a valid prefix", ErrConfig, p)
			}
		}
	default:
		return fmt.Errorf("%w: ProxyProtocol %v: want ProxyOff or ProxyRequired", ErrConfig, c.ProxyProtocol)
	}
	for _, err := range []error{
		setting.Check("MaxConnsPerSource", c.MaxConnsPerSource),
		setting.CheckOn("SourceIPv4Bits", c.SourceIPv4Bits),
		setting.CheckOn("SourceIPv6Bits", c.SourceIPv6Bits),
	} {
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if c.MaxConnsPerSource > 1<<30 {
		return fmt.Errorf("%w: MaxConnsPerSource %d is above 2^30", ErrConfig, c.MaxConnsPerSource)
	}
	if c.SourceIPv4Bits > 32 {
		return fmt.Errorf("%w: SourceIPv4Bits %d: want 1 to 32, or 0 for the default %d", ErrConfig, c.SourceIPv4Bits, DefaultSourceIPv4Bits)
	}
	if c.SourceIPv6Bits > 128 {
		return fmt.Errorf("%w: SourceIPv6Bits %d: want 1 to 128, or 0 for the default %d", ErrConfig, c.SourceIPv6Bits, DefaultSourceIPv6Bits)
	}
	return nil
}

// maxConnsPerSource resolves MaxConnsPerSource for a bound of maxConns
// open connections (0: none): 0 for no per-source bound.
func maxConnsPerSource(cfg, maxConns int) int {
	switch {
	case cfg > 0:
		return cfg
	case cfg < 0:
		return 0
	case maxConns > 0:
		return max(maxConns/10, 1)
	}
	return DefaultMaxConnsPerSource
}

// startSources sets up the per-source counts for the bound on open
// connections Start resolved. Called by Start before the engine runs.
func (s *Server) startSources() error {
	limit := maxConnsPerSource(s.cfg.MaxConnsPerSource, int(s.maxConns))
	if limit == 0 {
		return nil
	}
	c, err := sources.New(limit, s.cfg.SourceIPv4Bits, s.cfg.SourceIPv6Bits) // resolved by New
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.sources = c
	s.sourcesPub.Store(c)
	return nil
}

// perSource is the per-source bound in force, 0 for none; after Start.
func (s *Server) perSource() int {
	if s.sources == nil {
		return 0
	}
	return s.sources.Limit()
}

// awaitingHeader is what Conn.client points to while the connection's
// PROXY header has not arrived.
var awaitingHeader netip.AddrPort

// ClientAddr reports the client's address: the one the connection's PROXY
// header gave, or, without one (ProxyOff; a header with no address, such
// as a LOCAL health check or UNKNOWN), the peer's (PeerAddr). Logs and the
// per-source limit use it. Until the header has arrived it is the peer's;
// the handler's OnOpen comes after the header. An IPv4-mapped IPv6
// address is given as IPv4. Call it on the connection's event loop.
func (c *Conn) ClientAddr() netip.AddrPort {
	if c.proxied() {
		return *c.client
	}
	return c.PeerAddr()
}

// proxied reports whether c's PROXY header named its client, so that the
// client is not the peer.
func (c *Conn) proxied() bool { return c.client != nil && c.client != &awaitingHeader }

// PeerAddr reports the address of the peer that connected: with the
// PROXY protocol, the balancer. An IPv4-mapped IPv6 address is given as
// IPv4. Call it on the connection's event loop, as RemoteAddr.
func (c *Conn) PeerAddr() netip.AddrPort {
	return addrPort(c.gc.RemoteAddr())
}

// addrPort turns a connection's address into a netip.AddrPort, IPv4 as
// IPv4.
func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// proxyAdmit decides, in OnOpen, what a new connection's PROXY setting and
// per-source limit make of it: ReasonNone to open it, or why to refuse
// it. With ProxyRequired, a trusted peer's connection opens awaiting its
// header, and the per-source limit waits for it.
func (c *Conn) proxyAdmit() Reason {
	s := c.s
	if s.cfg.ProxyProtocol == ProxyRequired {
		if !s.trusted(c.PeerAddr().Addr()) {
			return ReasonProxyUntrusted
		}
		c.client = &awaitingHeader
		return ReasonNone
	}
	if !c.countSource() {
		return ReasonSourceLimit
	}
	return ReasonNone
}

// trusted reports whether peer, IPv4 as IPv4, is in Config.TrustedProxies.
// An IPv4 peer also matches a prefix written as IPv4-mapped IPv6
// (::ffff:10.0.0.0/104), the form a dual-stack socket shows it in.
func (s *Server) trusted(peer netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(peer) || (peer.Is4() && p.Contains(netip.AddrFrom16(peer.As16()))) {
			return true
		}
	}
	return false
}

// countSource counts c against its source's limit, if there is one, and
// reports whether c may stay. A loopback peer with no PROXY header's
// client is not counted: it is the host's own proxy or harness, behind
// which any number of clients may be. A client that a header names is
// counted, loopback or not.
func (c *Conn) countSource() bool {
	s := c.s
	if s.sources == nil {
		return true
	}
	client := c.ClientAddr().Addr()
	// Loopback is the address's, not its source's: ::1's /64 is ::/64.
	if (client.IsLoopback() && c.client == nil && !s.countLoopback) || !client.IsValid() {
		return true
	}
	key := s.sources.Key(client)
	if !s.sources.Acquire(key) {
		return false
	}
	c.flags.Or(flagSourceCounted)
	return true
}

// uncountSource releases c's place in its source's count, as it closes.
func (c *Conn) uncountSource() {
	if c.flags.Load()&flagSourceCounted != 0 {
		c.s.sources.Release(c.s.sources.Key(c.ClientAddr().Addr()))
	}
}

// readHeader parses c's PROXY header from its inbound bytes, in OnTraffic,
// and reports whether bytes after it are left for the protocol. When the
// header is whole it takes it off the buffer, sets the client, counts the
// source and runs the handler's OnOpen; an error, or a source over its
// limit, closes c with its reason.
func (c *Conn) readHeader() bool {
	buf, _ := c.gc.Peek(-1)
	h, n, err := proxyproto.Parse(buf)
	if err == proxyproto.ErrIncomplete {
		return false
	}
	if err != nil {
		r := ReasonProxyInvalid
		switch {
		case errors.Is(err, proxyproto.ErrNoHeader):
			r = ReasonProxyMissing
		case errors.Is(err, proxyproto.ErrOversized):
			r = ReasonProxyTooLarge
		}
		c.s.log.Warn("netserver: PROXY header refused", "peer", c.PeerAddr().String(), "reason", r.String(), "err", err.Error())
		_, _ = c.gc.Discard(-1)
		c.closeWith(r)
		return false
	}
	_, _ = c.gc.Discard(n) // n > 0
	c.client = nil
	if h.Source.IsValid() {
		client := netip.AddrPortFrom(h.Source.Addr().Unmap(), h.Source.Port())
		c.client = &client
	}
	if !c.countSource() {
		_, _ = c.gc.Discard(-1)
		c.closeWith(ReasonSourceLimit)
		return false
	}
	c.flags.And(^uint32(flagNoHandler))
	c.s.safely(c, func() { c.s.handler.OnOpen(c) })
	return !c.closing && c.gc.InboundBuffered() > 0
}
