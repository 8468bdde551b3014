package netserver_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// byPort is an echo handler that ends a connection in OnOpen as its
// client's port says: 1 closes it, 2 panics, 3 closes it from another
// goroutine (CloseAsync); any other port is echoed.
type byPort struct{ netserver.Echo }

func (byPort) OnOpen(c *netserver.Conn) {
	switch c.ClientAddr().Port() {
	case 1:
		_ = c.Close()
	case 2:
		panic("byPort: port 2")
	case 3:
		go func() { _ = c.CloseAsync(netserver.ReasonServerClosed) }()
	}
}

// TestSourceLimit_ReleasedOnEveryClose: with one connection per source,
// every way a counted connection can end frees its source's place exactly
// once: the next connection from the source gets in (a place never freed
// would lock the source out for good; one freed twice would let two in),
// and no source is left counted once all are closed.
func TestSourceLimit_ReleasedOnEveryClose(t *testing.T) {
	ends := []struct {
		name string
		port uint16
		idle bool // the connection stays silent until its idle timeout
	}{
		{name: "handler closes in OnOpen", port: 1},
		{name: "handler panics in OnOpen", port: 2},
		{name: "CloseAsync", port: 3},
		{name: "peer closes", port: 4},
		{name: "idle timeout", port: 5, idle: true},
	}
	for _, p := range []netserver.Protocol{netserver.Raw, netserver.Framed} {
		for _, end := range ends {
			t.Run(fmt.Sprintf("protocol=%v/%s", p, end.name), func(t *testing.T) {
				cfg := proxyCfg(p)
				cfg.MaxConnsPerSource = 1
				cfg.Timeouts.IdleTimeout = 300 * time.Millisecond
				s := start(t, cfg, byPort{})
				client := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.7"), end.port)
				for round := range 3 {
					c := dial(t, s)
					msg := []byte("hi")
					if p == netserver.Framed {
						msg = frame.AppendData(nil, 1, msg)
					}
					hdr := header(2, client, s.Addr())
					if end.idle || end.port <= 3 {
						msg = nil
					}
					c.Push(append(hdr, msg...))
					if end.port == 4 {
						assert.Equal(t, []byte("hi"), readEcho(t, c, p, 2), "round %d: a place for the source", round)
						require.NoError(t, c.Close())
					} else {
						_, _ = c.WaitClose(waitFor) // the server ends it
					}
					require.Eventually(t, func() bool { return s.Stats().Open == 0 }, waitFor, time.Millisecond, "round %d", round)
					assert.Zero(t, scrape(t, s)["netwheel_connection_sources"], "round %d: sources counted after every close", round)
					assert.Zero(t, s.Stats().Closed["source_limit"], "round %d: refused for its source", round)
				}
			})
		}
	}
}

// TestSourceLimit_ReleasedAtShutdown: connections open at a Shutdown, cut
// or drained, leave no source counted.
func TestSourceLimit_ReleasedAtShutdown(t *testing.T) {
	cfg := proxyCfg(netserver.Framed)
	cfg.Addr = "127.0.0.1:0"
	cfg.EventLoops = 2
	cfg.MaxConnsPerSource = 2
	s, err := netserver.New(cfg, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	for i := range 6 {
		c := dial(t, s)
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i / 2)}), uint16(1000+i))
		c.Push(append(header(1, client, s.Addr()), frame.AppendData(nil, 1, []byte("x"))...))
		_ = readEcho(t, c, netserver.Framed, 1)
	}
	assert.Equal(t, 3.0, scrape(t, s)["netwheel_connection_sources"])
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = s.Shutdown(ctx) // the peers answer nothing: cut at the deadline
	<-s.Done()
	assert.Zero(t, scrape(t, s)["netwheel_connection_sources"])
}
