package wheel

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
			for _, s := range []uint64{when, when - 1, when + 1, 0, maxWhen, maxWhen - 1, maxWhen - 2} {
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

// TestResetFrom_QuickStoresDeadline checks ResetFrom's path for a real-clock
// wheel of the default tick against deadline: from every starting state
// (stopped, pending, queued, counted; the stored tick the one wanted, one
// off, 0 or the end), at the edges of quickMax and MaxDuration and at
// random, the timer ends pending at deadline(from, d), keeps its quick
// and counted bits, and the call reports whether it was pending.
func TestResetFrom_QuickStoresDeadline(t *testing.T) {
	w := NewSimulated(func() int64 { return 0 })
	require.True(t, w.quick)
	n, qm := DefaultTick, time.Duration(quickMax)
	edges := []time.Duration{math.MinInt64, -qm - 1, -qm, -n, -1, 0, 1, n - 1, n, n + 1, time.Hour, qm - n, qm - 1, qm,
		qm + 1, qm + n, w.maxDur, w.maxDur + 1, 1<<62 - 1, 1 << 62, math.MaxInt64 - n, math.MaxInt64}
	var tm Timer
	tm.Init(w, func() {})
	check := func(from, d time.Duration) {
		want := w.deadline(from, d)
		for _, flags := range []uint64{0, statePending, statePending | stateQueued, stateQueued, statePending | stateCounted} {
			for _, held := range []uint64{want, want - 1, want + 1, 0, maxWhen, maxWhen - 1} {
				if held > maxWhen {
					continue
				}
				s0 := held<<whenShift | flags | stateQuick
				tm.state.Store(s0)
				got := tm.ResetFrom(from, d)
				s := tm.state.Load()
				for i := range w.in.shards {
					w.in.take(i) // what arm pushed: the inbox stays small
				}
				require.Equal(t, s0&statePending != 0, got, "from %d d %d state %#x: the result", from, d, s0)
				require.Equal(t, want, s>>whenShift, "from %d d %d state %#x: the deadline", from, d, s0)
				require.Equal(t, uint64(statePending|stateQuick)|s0&stateCounted, s&(statePending|stateQuick|stateCounted),
					"from %d d %d state %#x: the flags", from, d, s0)
			}
		}
	}
	for _, from := range edges {
		for _, d := range edges {
			check(from, d)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 3000 { // 90 states each, three times: about 2 s under -race
		from := time.Duration(rng.Int64N(math.MaxInt64 >> rng.IntN(63)))
		d := time.Duration(rng.Int64N(math.MaxInt64 >> rng.IntN(63)))
		if rng.IntN(4) == 0 {
			d = -d
		}
		check(from, d)
		check(qm-d, d)
		check(qm-d+1, d)
	}
}
