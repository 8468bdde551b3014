package netserver_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/proxyproto"
	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// loopback is the trusted proxies' prefix of the tests: the test is the
// balancer.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// who is an echo handler that reports each connection's client and peer
// as its OnOpen sees them, and each close's reason.
type who struct {
	netserver.Echo
	opened chan [2]netip.AddrPort // client, peer
	closed chan netserver.Reason
}

func newWho() *who {
	return &who{opened: make(chan [2]netip.AddrPort, 1000), closed: make(chan netserver.Reason, 1000)}
}

func (h *who) OnOpen(c *netserver.Conn) { h.opened <- [2]netip.AddrPort{c.ClientAddr(), c.PeerAddr()} }

func (h *who) OnClose(_ *netserver.Conn, r netserver.Reason) { h.closed <- r }

// proxyCfg is a server's config for protocol p, with the PROXY protocol
// required from loopback.
func proxyCfg(p netserver.Protocol) netserver.Config {
	return netserver.Config{Protocol: p, ProxyProtocol: netserver.ProxyRequired, TrustedProxies: loopback}
}

// header returns a PROXY header of version v saying that client connected
// to the server at dst.
func header(v int, client netip.AddrPort, dst net.Addr) []byte {
	d := dst.(*net.TCPAddr).AddrPort()
	if v == 1 {
		return proxyproto.AppendV1(nil, client, d)
	}
	return proxyproto.AppendV2(nil, proxyproto.Proxy, client, d, nil)
}

// randomClient returns a random IPv4 or IPv6 client address, in the
// documentation ranges.
func randomClient(rng *rand.Rand) netip.AddrPort {
	port := uint16(1 + rng.IntN(65535))
	if rng.IntN(2) == 0 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(256))}), port)
	}
	a := [16]byte{0x20, 0x01, 0x0d, 0xb8}
	for i := 8; i < 16; i++ {
		a[i] = byte(rng.IntN(256))
	}
	return netip.AddrPortFrom(netip.AddrFrom16(a), port)
}

// writeSplit writes b in pieces: one byte per write, random cuts, or all
// at once, at rng's choice, and returns the mode it chose.
func writeSplit(t *testing.T, c net.Conn, rng *rand.Rand, b []byte) string {
	t.Helper()
	mode := []string{"one byte per write", "random cuts", "one write"}[rng.IntN(3)]
	for len(b) > 0 {
		n := len(b)
		switch mode {
		case "one byte per write":
			n = 1
		case "random cuts":
			n = 1 + rng.IntN(len(b))
		}
		_, err := c.Write(b[:n])
		require.NoError(t, err)
		b = b[n:]
	}
	return mode
}

// TestProxy_RandomSplits sends, on real TCP, a PROXY header (version 1 or
// 2, of a random client) followed by the protocol's first messages, cut at
// random: part of the header first, which the server must hold without
// answering or closing, then the rest one byte per write, at random cuts
// or in one write (header and first message in one read). The echo must
// come back intact, and the handler's OnOpen see the header's client and
// the test's own address as the peer.
func TestProxy_RandomSplits(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(splitSeedEnv); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, splitSeedEnv)
	}
	t.Logf("seed %d (%s=%d repeats it)", seed, splitSeedEnv, seed)
	for _, p := range []netserver.Protocol{netserver.Raw, netserver.Framed} {
		for _, v := range []int{1, 2} {
			t.Run(fmt.Sprintf("protocol=%v/version=%d", p, v), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(v)<<8|uint64(p)))
				h := newWho()
				s := start(t, proxyCfg(p), h)
				for run := range 6 {
					client := randomClient(rng)
					c := dial(t, s)
					hdr := header(v, client, s.Addr())
					payload := make([]byte, 1+rng.IntN(3000))
					for i := range payload {
						payload[i] = byte(rng.IntN(256))
					}
					var wire []byte
					if p == netserver.Framed {
						for seq, i := uint64(1), 0; i < len(payload); seq++ {
							n := min(len(payload)-i, 1+rng.IntN(700))
							wire = frame.AppendData(wire, seq, payload[i:i+n])
							i += n
						}
					} else {
						wire = payload
					}
					cut := 1 + rng.IntN(len(hdr)-1)
					c.Push(hdr[:cut])
					require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
					_, err := c.Read(make([]byte, 1))
					var ne net.Error
					require.True(t, errors.As(err, &ne) && ne.Timeout(), "run %d: a partial header (%d of %d bytes) got %v, not silence", run, cut, len(hdr), err)
					mode := writeSplit(t, c, rng, append(hdr[cut:], wire...))
					got := readEcho(t, c, p, len(payload))
					require.Equal(t, payload, got, "run %d (%s): the echo", run, mode)
					select {
					case o := <-h.opened:
						assert.Equal(t, client.Addr().Unmap(), o[0].Addr(), "run %d: ClientAddr", run)
						assert.Equal(t, client.Port(), o[0].Port(), "run %d: ClientAddr's port", run)
						assert.Equal(t, c.LocalAddr().(*net.TCPAddr).AddrPort(), o[1], "run %d: PeerAddr", run)
					case <-time.After(waitFor):
						t.Fatalf("run %d: OnOpen was not called", run)
					}
					require.NoError(t, c.Close())
				}
			})
		}
	}
}

// readEcho reads n bytes of echo: as they are (Raw), or as the payloads of
// the echoed DATA frames (Framed).
func readEcho(t *testing.T, c *testpeer.Peer, p netserver.Protocol, n int) []byte {
	t.Helper()
	if p == netserver.Raw {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
		got := make([]byte, n)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		return got
	}
	var got []byte
	for len(got) < n {
		f, err := c.Next(waitFor)
		require.NoError(t, err)
		if f.Type == frame.TypeData {
			got = append(got, f.Payload...)
		}
	}
	return got
}

// TestProxy_Refusals checks each refusal of the PROXY protocol on real TCP:
// the connection closes with its own reason, counted by Stats and the
// metrics, Framed with a CLOSE frame that says it, and the handler hears
// of none of them.
func TestProxy_Refusals(t *testing.T) {
	v2 := proxyproto.AppendV2(nil, proxyproto.Proxy, netip.MustParseAddrPort("192.0.2.1:1000"), netip.MustParseAddrPort("10.0.0.1:9000"), nil)
	badVersion := bytes.Clone(v2)
	badVersion[12] = 0x31
	tests := []struct {
		name    string
		trusted string
		send    []byte
		want    netserver.Reason
	}{
		{name: "peer not trusted", trusted: "10.0.0.0/8", send: v2, want: netserver.ReasonProxyUntrusted},
		{name: "no header", trusted: "127.0.0.1/32", send: []byte("hello\n"), want: netserver.ReasonProxyMissing},
		{name: "a frame instead of a header", trusted: "127.0.0.1/32", send: frame.AppendData(nil, 1, []byte("x")), want: netserver.ReasonProxyMissing},
		{name: "malformed v1", trusted: "127.0.0.1/32", send: []byte("PROXY TCP4 192.0.2.1 10.0.0.1 99999 1\r\n"), want: netserver.ReasonProxyInvalid},
		{name: "v2 of version 3", trusted: "127.0.0.1/32", send: badVersion, want: netserver.ReasonProxyInvalid},
		{name: "v1 too long", trusted: "127.0.0.1/32", send: append([]byte("PROXY UNKNOWN "), bytes.Repeat([]byte("x"), 100)...), want: netserver.ReasonProxyTooLarge},
		{name: "v2 too long", trusted: "127.0.0.1/32", send: append(bytes.Clone(v2[:14]), 0xff, 0xff), want: netserver.ReasonProxyTooLarge},
	}
	for _, p := range []netserver.Protocol{netserver.Raw, netserver.Framed} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("protocol=%v/%s", p, tt.name), func(t *testing.T) {
				h := newWho()
				cfg := proxyCfg(p)
				cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(tt.trusted)}
				s := start(t, cfg, h)
				c := dial(t, s)
				_, _ = c.Write(tt.send) // the server may have closed already (untrusted)
				if p == netserver.Framed {
					require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
					f, err := c.Frames.Next()
					require.NoError(t, err)
					assert.Equal(t, frame.TypeClose, f.Type)
					assert.Equal(t, frame.CodeProxyHeader, f.Code)
					assert.Equal(t, tt.want.String(), string(f.Reason))
				}
				require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
				_, err := io.ReadAll(c.Conn)
				if err != nil {
					require.True(t, testpeer.Closed(err), "%v", err)
				}
				require.Eventually(t, func() bool { return s.Stats().Closed[tt.want.String()] == 1 }, waitFor, time.Millisecond)
				assert.Equal(t, 1.0, closedMetric(t, s, tt.want.String()))
				assert.Zero(t, s.Stats().Open)
				assert.Empty(t, h.opened, "OnOpen was called")
				assert.Empty(t, h.closed, "OnClose was called")
			})
		}
	}
}

// TestProxy_HandshakeDeadlineCoversTheHeader: a header that never ends is
// closed by the handshake timeout, never before it.
func TestProxy_HandshakeDeadlineCoversTheHeader(t *testing.T) {
	const handshake = 150 * time.Millisecond
	cfg := proxyCfg(netserver.Raw)
	cfg.Timeouts.HandshakeTimeout = handshake
	h := newWho()
	s := start(t, cfg, h)
	c := dial(t, s)
	c.Push([]byte("PROXY TCP4 192.0.2.1"))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
	_, err := io.ReadAll(c.Conn)
	ended := time.Now()
	if err != nil {
		require.True(t, testpeer.Closed(err), "%v", err)
	}
	assert.GreaterOrEqual(t, ended.Sub(c.Dialed), handshake, "closed before the handshake timeout")
	require.Eventually(t, func() bool { return s.Stats().Closed["handshake"] == 1 }, waitFor, time.Millisecond)
	assert.Empty(t, h.opened)
	assert.Empty(t, h.closed)
}

// TestProxy_LocalAndUnknownKeepThePeer: a v2 LOCAL header (a balancer's
// health check) and a v1 UNKNOWN one leave the client address the peer's.
func TestProxy_LocalAndUnknownKeepThePeer(t *testing.T) {
	h := newWho()
	s := start(t, proxyCfg(netserver.Raw), h)
	for _, hdr := range [][]byte{
		proxyproto.AppendV2(nil, proxyproto.Local, netip.AddrPort{}, netip.AddrPort{}, nil),
		proxyproto.AppendV1(nil, netip.AddrPort{}, netip.AddrPort{}),
	} {
		c := dial(t, s)
		c.Push(append(hdr, "ping"...))
		assert.Equal(t, []byte("ping"), readEcho(t, c, netserver.Raw, 4))
		o := <-h.opened
		assert.Equal(t, c.LocalAddr().(*net.TCPAddr).AddrPort(), o[0], "ClientAddr is the peer")
		assert.Equal(t, o[0], o[1])
	}
}

// TestProxy_LogsTheClient: the close is logged with the client's address
// as remote, and the balancer's as peer.
func TestProxy_LogsTheClient(t *testing.T) {
	log, logs := newLogCapture()
	cfg := proxyCfg(netserver.Raw)
	cfg.Logger = log
	h := newWho()
	s := start(t, cfg, h)
	c := dial(t, s)
	client := netip.MustParseAddrPort("192.0.2.9:1234")
	c.Push(append(header(2, client, s.Addr()), "hi"...))
	assert.Equal(t, []byte("hi"), readEcho(t, c, netserver.Raw, 2))
	require.NoError(t, c.Close())
	assert.Equal(t, netserver.ReasonPeerClosed, <-h.closed)
	closes := logs.attrsOf("netserver: connection closed")
	require.Len(t, closes, 1)
	assert.Equal(t, client.String(), closes[0]["remote"].String())
	assert.Equal(t, c.LocalAddr().String(), closes[0]["peer"].String())
}

// TestSourceLimit_ByHeader: the per-source limit counts the header's
// client, IPv4 by address and IPv6 by /64, across connections on every
// event loop; one over it is closed at once with ReasonSourceLimit (Framed:
// a CLOSE frame saying so), other sources get in, and a place freed is
// taken again.
func TestSourceLimit_ByHeader(t *testing.T) {
	for _, p := range []netserver.Protocol{netserver.Raw, netserver.Framed} {
		t.Run("protocol="+p.String(), func(t *testing.T) {
			cfg := proxyCfg(p)
			cfg.MaxConnsPerSource = 2
			h := newWho()
			s := start(t, cfg, h)
			open := func(client string) (*testpeer.Peer, bool) {
				c := dial(t, s)
				msg := []byte("hi")
				if p == netserver.Framed {
					msg = frame.AppendData(nil, 1, msg)
				}
				c.Push(append(header(2, netip.MustParseAddrPort(client), s.Addr()), msg...))
				require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
				if p == netserver.Raw {
					got := make([]byte, 2)
					_, err := io.ReadFull(c.Conn, got)
					return c, err == nil
				}
				for {
					f, err := c.Frames.Next()
					require.NoError(t, err)
					switch f.Type {
					case frame.TypeData:
						return c, true
					case frame.TypeClose:
						assert.Equal(t, frame.CodeSourceLimit, f.Code)
						assert.Equal(t, "source_limit", string(f.Reason))
						return c, false
					}
				}
			}
			a1, ok := open("192.0.2.1:1")
			require.True(t, ok)
			_, ok = open("192.0.2.1:2")
			require.True(t, ok)
			_, ok = open("192.0.2.1:3")
			assert.False(t, ok, "a third connection from 192.0.2.1")
			_, ok = open("192.0.2.2:1")
			assert.True(t, ok, "another IPv4 source")
			_, ok = open("[2001:db8::1]:1")
			require.True(t, ok)
			_, ok = open("[2001:db8::2]:1")
			require.True(t, ok)
			_, ok = open("[2001:db8::3]:1")
			assert.False(t, ok, "a third connection from 2001:db8::/64")
			_, ok = open("[2001:db8:0:1::1]:1")
			assert.True(t, ok, "another /64")
			require.NoError(t, a1.Close())
			require.Eventually(t, func() bool { return s.Stats().Closed["peer_closed"] == 1 }, waitFor, time.Millisecond)
			_, ok = open("192.0.2.1:4")
			assert.True(t, ok, "the place 192.0.2.1 freed")
			require.Eventually(t, func() bool { return s.Stats().Closed["source_limit"] == 2 }, waitFor, time.Millisecond)
			assert.Equal(t, 2.0, closedMetric(t, s, "source_limit"))
			assert.Equal(t, 4.0, scrape(t, s)["netwheel_connection_sources"], "192.0.2.1, 192.0.2.2, 2001:db8::/64, 2001:db8:0:1::/64")
			assert.Equal(t, 7, len(h.opened), "OnOpen of the connections let in only")
		})
	}
}

// TestSourceLimit_ByPeer: without the PROXY protocol the peer is the
// source; a connection over the limit is refused in OnOpen (Framed: with a
// CLOSE frame). Loopback peers are not counted unless a test asks.
func TestSourceLimit_ByPeer(t *testing.T) {
	cfg := framedCfg()
	cfg.Addr = "127.0.0.1:0"
	cfg.EventLoops = 2
	cfg.MaxConnsPerSource = 2
	s, err := netserver.New(cfg, netserver.Echo{})
	require.NoError(t, err)
	s.CountLoopback()
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
	var cs []*testpeer.Peer
	for range 2 {
		c := dial(t, s)
		c.Push(frame.AppendData(nil, 1, []byte("x")))
		f, err := c.Next(waitFor)
		require.NoError(t, err)
		require.NotEqual(t, frame.TypeClose, f.Type)
		cs = append(cs, c)
	}
	c := dial(t, s)
	code, _ := c.WaitClose(waitFor)
	assert.Equal(t, frame.CodeSourceLimit, code)
	assert.Equal(t, int64(1), s.Stats().Closed["source_limit"])

	exempt := start(t, netserver.Config{Protocol: netserver.Raw, MaxConnsPerSource: 1}, nil)
	for range 3 {
		c := dial(t, exempt)
		c.Push([]byte("ok"))
		assert.Equal(t, []byte("ok"), readEcho(t, c, netserver.Raw, 2), "loopback is not counted")
	}
}
