package idle_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
)

// TestCheckAt steps through where the policy timer is armed: a deadline
// within the grid exactly (a close on time), a further one at the last
// grid instant before it, shared by every tracker.
func TestCheckAt(t *testing.T) {
	const grid = int64(idle.CheckGrid)
	for _, tc := range []struct {
		name           string
		now, next, arm int64
	}{
		{name: "next tick", now: 5 * grid, next: 5*grid + 1, arm: 5*grid + 1},
		{name: "a grid away: exact", now: 5*grid + 7, next: 6*grid + 7, arm: 6*grid + 7},
		{name: "just over a grid away: the grid instant between", now: 5*grid + 7, next: 6*grid + 8, arm: 6 * grid},
		{name: "on the grid: exact", now: 5 * grid, next: 9 * grid, arm: 9 * grid},
		{name: "far: the last grid instant before", now: 0, next: 30*grid + grid/2, arm: 30 * grid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, time.Duration(tc.arm), time.Duration(idle.CheckAt(tc.now, tc.next)))
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		now := rng.Int64N(1 << 50)
		next := now + 1 + rng.Int64N(1<<(1+rng.IntN(40)))
		at := idle.CheckAt(now, next)
		require.Greater(t, at, now, "now %d next %d: armed for the past", now, next)
		require.LessOrEqual(t, at, next, "now %d next %d: armed past the deadline", now, next)
		if at != next {
			require.Zero(t, at%grid, "now %d next %d: a check off the grid", now, next)
			require.Less(t, next-at, grid, "now %d next %d: a check more than a grid early", now, next)
		}
	}
}
