package wheel_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/wheel"
)

// The model is the specification of a manual-clock wheel, written without
// buckets: a map from timer to the instant it must fire. A timer armed for d
// at time now fires at the first tick boundary that is at or after now+d and
// strictly after now.
type model struct {
	tick    int64
	now     int64
	pending map[int]int64
}

func (m *model) fireTime(d time.Duration) int64 {
	end := m.now + max(int64(d), 0)
	f := (end + m.tick - 1) / m.tick * m.tick
	if f <= m.now {
		f = (m.now/m.tick + 1) * m.tick
	}
	return f
}

type firing struct {
	id int
	at int64
}

// harness runs the same operations on a wheel and on the model: a manual
// wheel, or a real-clock wheel on a simulated clock (sim) whose driver the
// harness steps where it would wake.
type harness struct {
	t      testing.TB
	clk    *wheel.ManualClock // nil for sim
	now    int64              // the simulated clock
	until  int64              // sim: when the driver plans to wake; 0 before it ran
	w      *wheel.Wheel
	timers []wheel.Timer
	m      model
	// rearm[id] > 0 makes timer id's next callback re-arm itself for that long.
	rearm     []time.Duration
	modelRe   []time.Duration
	got, want []firing
}

func newHarness(t testing.TB, n int, tick time.Duration, sim bool) *harness {
	h := &harness{
		t:       t,
		timers:  make([]wheel.Timer, n),
		m:       model{tick: int64(tick), pending: map[int]int64{}},
		rearm:   make([]time.Duration, n),
		modelRe: make([]time.Duration, n),
	}
	if sim {
		h.w = wheel.NewSimulated(func() int64 { return h.now }, wheel.WithTick(tick))
	} else {
		h.clk = wheel.NewManualClock()
		h.w = wheel.New(wheel.WithClock(h.clk), wheel.WithTick(tick))
	}
	for i := range h.timers {
		h.timers[i].Init(h.w, func() {
			h.got = append(h.got, firing{i, int64(h.w.Now())})
			if d := h.rearm[i]; d != 0 {
				h.rearm[i] = 0
				require.False(h.t, h.timers[i].Reset(d), "Reset from its own callback: timer %d was not pending", i)
			}
		})
	}
	return h
}

func (h *harness) reset(id int, d time.Duration) {
	_, wasPending := h.m.pending[id]
	h.m.pending[id] = h.m.fireTime(d)
	got := h.timers[id].Reset(d)
	require.Equal(h.t, wasPending, got, "Reset(%v) of timer %d at %v", d, id, time.Duration(h.m.now))
}

func (h *harness) stop(id int) {
	_, wasPending := h.m.pending[id]
	delete(h.m.pending, id)
	got := h.timers[id].Stop()
	require.Equal(h.t, wasPending, got, "Stop of timer %d at %v", id, time.Duration(h.m.now))
}

func (h *harness) setRearm(id int, d time.Duration) {
	h.rearm[id] = d
	h.modelRe[id] = d
}

// advance moves both forward and compares what fired, and when.
func (h *harness) advance(d time.Duration) {
	target := h.m.now + int64(d)
	h.want = h.want[:0]
	for {
		next, ok := int64(0), false
		for _, at := range h.m.pending {
			if !ok || at < next {
				next, ok = at, true
			}
		}
		if !ok || next > target {
			break
		}
		h.m.now = next
		var due []int
		for id, at := range h.m.pending {
			if at == next {
				due = append(due, id)
			}
		}
		slices.Sort(due)
		for _, id := range due {
			delete(h.m.pending, id)
			h.want = append(h.want, firing{id, next})
			if r := h.modelRe[id]; r != 0 {
				h.modelRe[id] = 0
				h.m.pending[id] = h.m.fireTime(r)
			}
		}
	}
	h.m.now = target

	h.got = h.got[:0]
	if h.clk != nil {
		h.clk.Advance(d)
	} else {
		// Step only where the real driver would wake: at its plan (the
		// first at 0), or at once when a reset asked for a wake-up.
		until := h.until
		if h.w.WakeRequested() {
			until = h.w.Step()
		}
		for until <= target {
			h.now = max(h.now, until)
			until = h.w.Step()
		}
		h.now = target
		h.until = until
	}
	require.True(h.t, slices.IsSortedFunc(h.got, func(a, b firing) int { return int(a.at - b.at) }),
		"callbacks out of deadline order: %v", h.got)
	// Within one tick the order is unspecified.
	slices.SortFunc(h.got, cmpFiring)
	slices.SortFunc(h.want, cmpFiring)
	require.Equal(h.t, fmt.Sprint(h.want), fmt.Sprint(h.got), "fired during Advance(%v) to %v", d, time.Duration(target))
	require.Equal(h.t, time.Duration(target), h.w.Now())
	h.check()
}

func (h *harness) check() {
	if h.clk == nil {
		h.w.Exit() // count what waits on the inbox, as a manual wheel's Len does
	}
	require.Equal(h.t, len(h.m.pending), h.w.Len(), "Len")
	for id := range h.timers {
		_, p := h.m.pending[id]
		require.Equal(h.t, p, h.timers[id].Pending(), "Pending of timer %d", id)
	}
}

func cmpFiring(a, b firing) int {
	if a.at != b.at {
		if a.at < b.at {
			return -1
		}
		return 1
	}
	return a.id - b.id
}

// durations worth trying: level boundaries, sub-tick, negative, huge.
var interesting = []time.Duration{
	-time.Millisecond, 0, 1, 999 * time.Microsecond, time.Millisecond, 1500 * time.Microsecond,
	2 * time.Millisecond, 63 * time.Millisecond, 64 * time.Millisecond, 65 * time.Millisecond,
	4095 * time.Millisecond, 4096 * time.Millisecond, 4097 * time.Millisecond, 30 * time.Second,
	262144 * time.Millisecond, 5 * time.Hour, 30 * 24 * time.Hour, 400 * 24 * time.Hour,
}

var steps = []time.Duration{
	0, 1, 500 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 63 * time.Millisecond,
	64 * time.Millisecond, time.Second, 70 * time.Second, 5 * time.Hour, 31 * 24 * time.Hour,
}

// run decodes ops from data: each op is 4 bytes (kind, timer, two bytes of argument).
func (h *harness) run(data []byte) {
	n := len(h.timers)
	for len(data) >= 4 {
		kind, id, arg := data[0]%8, int(data[1])%n, binary.LittleEndian.Uint16(data[2:4])
		data = data[4:]
		switch kind {
		case 0, 1, 2:
			h.reset(id, pick(interesting, arg))
		case 3:
			h.stop(id)
		case 4, 5:
			h.advance(pick(steps, arg))
		case 6:
			h.setRearm(id, pick(interesting, arg)|1) // never 0: 0 means "no re-arm"
		case 7:
			// arbitrary durations, in nanoseconds up to ~18 hours
			h.reset(id, time.Duration(arg)*time.Duration(arg)*time.Duration(arg)*17)
		}
	}
	// Drain everything that is left: no timer may be lost.
	// (A callback may re-arm once, hence the loop.)
	for len(h.m.pending) > 0 {
		last := h.m.now
		for _, at := range h.m.pending {
			last = max(last, at)
		}
		h.advance(time.Duration(last - h.m.now))
	}
	h.advance(0) // Len counts what the wheel has taken in
	require.Zero(h.t, h.w.Len())
}

func pick(ds []time.Duration, arg uint16) time.Duration {
	if int(arg)%4 == 3 {
		// jitter around an interesting value
		return ds[int(arg>>2)%len(ds)] + time.Duration(arg>>5)*time.Microsecond
	}
	return ds[int(arg>>2)%len(ds)]
}

func TestWheel_MatchesModel(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		data := make([]byte, 4*600)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		tick := []time.Duration{time.Millisecond, 100 * time.Microsecond, 10 * time.Millisecond}[seed%3]
		for _, sim := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d/sim=%t", seed, sim), func(t *testing.T) {
				h := newHarness(t, 1+seed%40, tick, sim)
				h.run(data)
			})
		}
	}
}

func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 1, 4, 0, 4, 0, 8, 0})
	f.Add([]byte{6, 2, 16, 0, 0, 2, 20, 0, 4, 0, 40, 0, 3, 2, 0, 0, 5, 0, 1, 1})
	f.Add([]byte{7, 3, 255, 255, 1, 3, 9, 0, 4, 0, 36, 0, 2, 3, 0, 0, 5, 0, 28, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHarness(t, 8, time.Millisecond, len(data)%2 == 1)
		h.run(data)
	})
}
