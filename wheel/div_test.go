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

// TestHolds checks ResetFrom's inlined same-tick check against the deadline
// the full path computes: whenever holds says a pending timer keeps its
// tick, deadline gives that tick, at the edges (negative, clamped and
// overflowing from and d) and at random; and it does say so for ordinary
// instants, or the fast path would be dead. A manual wheel never takes it.
func TestHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tick := range []time.Duration{MinTick, DefaultTick, MaxTick, 999_983 * time.Nanosecond} {
		w := build([]Option{WithTick(tick)})
		n := time.Duration(tick)
		edges := []time.Duration{math.MinInt64, -n, -1, 0, 1, n - 1, n, n + 1, time.Hour,
			w.maxDur - 1, w.maxDur, w.maxDur + 1, 1<<62 - 1, 1 << 62, math.MaxInt64 - n, math.MaxInt64}
		held, ordinary := 0, 0
		check := func(from, d time.Duration) {
			when := w.deadline(from, d)
			for _, s := range []uint64{when, when - 1, when + 1, maxWhen, maxWhen - 1, maxWhen - 2} {
				st := s<<whenShift | statePending | stateCounted
				if w.holds(st, from, d) {
					held++
					if s != when {
						t.Fatalf("tick %v: holds(%d, %d, %d) for a deadline of tick %d, want tick %d", tick, s, from, d, s, when)
					}
				}
			}
		}
		for _, from := range edges {
			for _, d := range edges {
				check(from, d)
			}
		}
		for range 100000 {
			from := time.Duration(rng.Int64N(math.MaxInt64 >> rng.IntN(63)))
			d := time.Duration(rng.Int64N(math.MaxInt64 >> rng.IntN(63)))
			check(from, d)
			if from < time.Hour*24*365 && d < time.Hour {
				ordinary++
				if !w.holds(w.deadline(from, d)<<whenShift|statePending, from, d) {
					t.Fatalf("tick %v: holds is false for its own deadline, from %d d %d", tick, from, d)
				}
			}
		}
		if held == 0 || ordinary == 0 {
			t.Fatalf("tick %v: held %d, ordinary %d: the check exercised nothing", tick, held, ordinary)
		}
	}
	m := build([]Option{WithClock(NewManualClock())})
	if m.holds(m.deadline(time.Second, time.Second)<<whenShift|statePending, time.Second, time.Second) {
		t.Fatal("a manual wheel's timer takes the same-tick fast path")
	}
}
