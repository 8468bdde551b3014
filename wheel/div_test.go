package wheel

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestDivTick checks the reciprocal division against the / and % operators,
// at the edges and at random, for the smallest, default, largest and an odd
// tick.
func TestDivTick(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tick := range []time.Duration{MinTick, DefaultTick, MaxTick, 999_983 * time.Nanosecond} {
		w := build([]Option{WithTick(tick), WithClock(NewManualClock())})
		n := uint64(tick)
		xs := []uint64{0, 1, n - 1, n, n + 1, 2*n - 1, 2 * n, math.MaxInt64, math.MaxInt64 - n, math.MaxInt64 / n * n}
		for range 100000 {
			xs = append(xs, rng.Uint64N(math.MaxInt64))
		}
		for _, x := range xs {
			q, r := w.divTick(x)
			if q != x/n || r != x%n {
				t.Fatalf("tick %v: divTick(%d) = %d, %d; want %d, %d", tick, x, q, r, x/n, x%n)
			}
		}
	}
}
