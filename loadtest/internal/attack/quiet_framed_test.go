package attack

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver"
)

// TestRun_QuietKeptAliveAtTheBarrier_Framed is TestRun_QuietKeptAliveAtTheBarrier
// on the framed protocol against a real netserver: the answer recorded for
// the last message is the server's ACK of it, not that of a keep-alive.
func TestRun_QuietKeptAliveAtTheBarrier_Framed(t *testing.T) {
	const conns = 8
	const idleT = 300 * time.Millisecond
	const slow = 4 * idleT
	s, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed, Tick: time.Millisecond,
		Timeouts: idle.Config{IdleTimeout: idleT}}, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	testDialDelay = func(_ string, i int) time.Duration {
		if i == conns-1 {
			return slow
		}
		return 0
	}
	t.Cleanup(func() { testDialDelay = nil })
	cfg := Config{Addr: s.Addr().String(), Proto: Framed, Scenarios: []string{Idle}, Conns: map[string]int{Idle: conns},
		Size: 16, Duration: 100 * time.Millisecond, IdleSpread: 50 * time.Millisecond, DialConcurrency: conns,
		Timeouts: report.Timeouts{Idle: idleT, Tick: time.Millisecond, Slack: 300 * time.Millisecond}}
	var mu sync.Mutex
	var results []report.ConnResult
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := Run(ctx, cfg, &Counters{}, func(r report.ConnResult) { mu.Lock(); results = append(results, r); mu.Unlock() })
	require.NoError(t, err)
	require.Len(t, results, conns)
	require.False(t, out.Barrier.TimedOut)
	for _, r := range results {
		require.Empty(t, r.Err)
		send := r.ExpectedAt.Add(-idleT)
		assert.False(t, r.AckedAt.Before(send), "the answer recorded is the last message's, not a keep-alive's")
	}
}
