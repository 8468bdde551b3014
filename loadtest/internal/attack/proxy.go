package attack

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net"
	"net/netip"

	"github.com/netwheel/netwheel/internal/proxyproto"
)

// Proxy makes the harness play a balancer that speaks the PROXY protocol:
// each connection starts with a header naming a client of its own, drawn
// from Clients, so that one machine tests a server behind a balancer as
// many sources. The zero Proxy sends no header.
type Proxy struct {
	// Version is 0 (no header), 1 or 2.
	Version int
	// Clients are the addresses the headers name. Connection k's client is
	// the k-th source of it after the first address, which the flooding
	// source of the sourceflood scenario claims for all its connections
	// (FloodSource): an IPv4 address, or for IPv6 the ::1 of a /64 of its
	// own (a server counts IPv6 sources by /64), wrapping around when the
	// prefix has fewer sources than connections.
	Clients netip.Prefix
}

// ParseProxy parses -proxy's version ("", "v1" or "v2") and the clients'
// prefix.
func ParseProxy(version, clients string) (Proxy, error) {
	var p Proxy
	switch version {
	case "":
		return p, nil
	case "v1":
		p.Version = 1
	case "v2":
		p.Version = 2
	default:
		return p, fmt.Errorf("-proxy %q: want v1 or v2", version)
	}
	pfx, err := netip.ParsePrefix(clients)
	if err != nil {
		return p, fmt.Errorf("-proxy-clients %q: want a prefix such as 198.18.0.0/15 or 2001:db8::/32: %v", clients, err)
	}
	p.Clients = pfx.Masked()
	if p.Sources() < 2 {
		return p, fmt.Errorf("-proxy-clients %s holds one source: the flooding source takes the first, and the others need more", p.Clients)
	}
	return p, nil
}

// Sources returns how many sources Clients holds (at most 2^62): IPv4
// addresses, or IPv6 /64s (its addresses, for a prefix longer than /64).
func (p Proxy) Sources() uint64 {
	b := p.Clients.Bits()
	span := 32 - b
	if p.Clients.Addr().Is6() {
		span = 64 - b
		if b > 64 {
			span = 128 - b
		}
	}
	return 1 << min(span, 62)
}

// FloodSource returns the client address the flooding source's
// connections all claim: the first source of Clients.
func (p Proxy) FloodSource() netip.Addr { return p.source(0) }

// Client returns the client address of the harness's k-th connection
// (k from 0): every source of Clients but the first in turn.
func (p Proxy) Client(k uint64) netip.Addr { return p.source(1 + k%(p.Sources()-1)) }

// source returns Clients' i-th source: its i-th IPv4 address, or the ::1
// of its i-th /64.
func (p Proxy) source(i uint64) netip.Addr {
	base := p.Clients.Addr()
	if base.Is4() {
		a := base.As4()
		binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(a[:])+uint32(i))
		return netip.AddrFrom4(a)
	}
	a := base.As16()
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	if p.Clients.Bits() <= 64 {
		hi += i
		lo = 1
	} else {
		var carry uint64
		lo, carry = bits.Add64(lo, i, 0)
		hi += carry
	}
	binary.BigEndian.PutUint64(a[:8], hi)
	binary.BigEndian.PutUint64(a[8:], lo)
	return netip.AddrFrom16(a)
}

// header returns the header for connection c, which a client at client
// opened: the client's port is c's own local port, the destination c's
// remote address.
func (p Proxy) header(c net.Conn, client netip.Addr) []byte {
	var local, remote netip.AddrPort
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		local = a.AddrPort()
	}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		remote = a.AddrPort()
	}
	src := netip.AddrPortFrom(client, local.Port())
	if p.Version == 1 {
		return proxyproto.AppendV1(nil, src, remote)
	}
	return proxyproto.AppendV2(nil, proxyproto.Proxy, src, remote, nil)
}
