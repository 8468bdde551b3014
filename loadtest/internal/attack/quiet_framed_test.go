package attack

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver"
)

// TestRun_QuietKeptAliveAtTheBarrier_Framed is TestRun_QuietKeptAliveAtTheBarrier
// on the framed protocol against a real netserver: the answer recorded for
// the last message is the server's ACK of it, not that of a keep-alive.
func TestRun_QuietKeptAliveAtTheBarrier_Framed(t *testing.T) {
	const idleT = 600 * time.Millisecond
	s, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed, Tick: time.Millisecond,
		Timeouts: idle.Config{IdleTimeout: idleT}}, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	testQuietKeptAlive(t, s.Addr().String(), Framed, idleT)
}
