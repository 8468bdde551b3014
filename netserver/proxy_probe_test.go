package netserver_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
)

// probeCounter is a Raw echo handler with a keepalive probe that counts
// the connections opened and the probes it was asked for.
type probeCounter struct {
	netserver.Echo
	opened, probes atomic.Int32
}

func (p *probeCounter) OnOpen(*netserver.Conn)  { p.opened.Add(1) }
func (p *probeCounter) OnProbe(*netserver.Conn) { p.probes.Add(1) }

// TestProxy_NoProbeBeforeOpen: a connection awaiting its PROXY header has
// not been opened for the handler, which never hears of it (no OnOpen, no
// OnClose): it is not asked for a keepalive probe either. The balancer's
// silence closes it by the keepalive's timeout, as any silent peer's does.
func TestProxy_NoProbeBeforeOpen(t *testing.T) {
	cfg := proxyCfg(netserver.Raw)
	cfg.Timeouts.KeepaliveTime = 20 * time.Millisecond
	cfg.Timeouts.KeepaliveTimeout = 20 * time.Millisecond
	cfg.Timeouts.HandshakeTimeout = 5 * time.Second
	h := &probeCounter{}
	s := start(t, cfg, h)
	c := dial(t, s)
	c.Push([]byte("PROXY TCP4 192.0.2.1")) // and no more
	require.Eventually(t, func() bool { return s.Stats().Closed["keepalive"] == 1 }, waitFor, time.Millisecond)
	assert.Zero(t, h.opened.Load(), "OnOpen")
	assert.Zero(t, h.probes.Load(), "OnProbe of a connection the handler never opened")
}
