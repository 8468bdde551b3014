package main

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver"
)

// TestEndToEnd_Sourceflood: through the PROXY protocol the harness plays
// one flooding source and many others. netwheel's per-source limit holds
// the flooder at its limit, refusing the rest with a CLOSE saying
// source_limit, and every other source gets in and is answered; a server
// without a per-source limit lets the flooder take what it asks and, at
// its MaxConns, refuses the other sources, which fails both checks.
func TestEndToEnd_Sourceflood(t *testing.T) {
	// The server's idle timeout is shorter than the scenario: the held
	// connections keep themselves alive (a slow machine once let them die
	// idle).
	for _, v := range []string{"v1", "v2"} {
		r, out := e2e(t, "-proxy", v, "-scenario", "sourceflood", "-max-conns-per-source", "20", "-sourceflood-conns", "40",
			"-conns", "30", "-idle", "400ms")
		s := r.Scenario(scenario.Sourceflood)
		require.NotNil(t, s, out)
		assert.Equal(t, 20, s.Limit)
		fl, nb := s.Roles[scenario.RoleFlooder], s.Roles[scenario.RoleNeighbour]
		require.NotNil(t, fl, out)
		require.NotNil(t, nb, out)
		assert.Equal(t, 20, fl.Ends["client"], "the flooder is held at its limit, no more and no fewer: %v", fl.Ends)
		assert.Equal(t, 20, fl.Ends["source_limit"], "the rest refused with a CLOSE saying so: %v", fl.Ends)
		assert.Equal(t, 30, nb.Ends["client"], "every other source served to the end: %v", nb.Ends)
		assert.Equal(t, uint64(30), s.Recv, "the other sources' messages answered (the flooder's are not waited for)")
		assert.Contains(t, out, "[sourceflood] ok", out)
		require.NotNil(t, r.Server)
		assert.Equal(t, int64(20), r.Server.Closes["source_limit"], "%v", r.Server.Closes)
	}

	// No per-source limit, and a MaxConns the flood fills.
	cfg := netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed, ProxyProtocol: netserver.ProxyRequired,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, MaxConnsPerSource: netserver.Off, MaxConns: 50}
	srv, err := netserver.New(cfg, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
	})
	r, out := e2e(t, "-addr", srv.Addr().String(), "-proto", "framed", "-proxy", "v2", "-scenario", "sourceflood",
		"-max-conns-per-source", "20", "-sourceflood-conns", "40", "-conns", "30")
	s := r.Scenario(scenario.Sourceflood)
	require.NotNil(t, s, out)
	assert.Equal(t, 40, s.Roles[scenario.RoleFlooder].Ends["client"], "the flooder took all it asked for: %v", s.Roles[scenario.RoleFlooder].Ends)
	assert.Equal(t, 20, s.Roles[scenario.RoleNeighbour].Ends["overload"], "the other sources beyond MaxConns refused: %v", s.Roles[scenario.RoleNeighbour].Ends)
	assert.Contains(t, out, "! the server held 40 connections of the flooder open, above its limit of 20", out)
	assert.Contains(t, out, "! 20 of 30 neighbour connections were not served to the end (overload=20)", out)
}
