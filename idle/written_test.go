package idle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// TestTracker_WriteStallSteps follows the Tracker's write-stall timer as it
// tells the writer's stamps to its WriteStall: a queue that drained and
// started again between two firings runs from its own Written, exactly
// (neither from the first queue, which would be early, nor from the
// firing, which would be late).
func TestTracker_WriteStallSteps(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "a new queue between firings runs from its own Written", steps: []step{
			{advance: 1 * s, event: written}, // 1s: timer armed for 5s
			{advance: 1 * s, event: drained}, // 2s
			{advance: 1 * s, event: written}, // 3s: stalls at 7s
			{advance: 2 * s},                 // 5s: the timer sees the new queue, re-arms
			{advance: 2*s - 1},
			{advance: 1, want: []string{"close:write_stall 7s"}},
		}},
		{name: "drained at each firing: the timer is freed, the next Written arms it", steps: []step{
			{advance: 1 * s, event: written},
			{advance: 3 * s, event: drained},
			{advance: 1 * s},                 // 5s: nothing queued
			{advance: 1 * s, event: written}, // 6s: stalls at 10s
			{advance: 4*s - 1},
			{advance: 1, want: []string{"close:write_stall 10s"}},
		}},
		{name: "Written while queued does not move the deadline", steps: []step{
			{advance: 0, event: written}, // 0s: stalls at 4s
			{advance: 3 * s, event: written},
			{advance: 1 * s, want: []string{"close:write_stall 4s"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := runSteps(t, only(idle.Config{WriteStallTimeout: 4 * s}), tt.steps)
			due, ok := h.tr.Due()
			require.True(t, ok)
			assert.Equal(t, h.clk.Now(), due, "Due is the write-stall deadline")
			assert.Zero(t, h.w.Len(), "timers left pending after the close")
		})
	}
}

// TestTracker_WrittenNoAllocs: the writer's calls allocate nothing, nor do
// the timer's firings, whatever they find.
func TestTracker_WrittenNoAllocs(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	tr, err := idle.NewTracker(w, only(idle.Config{WriteStallTimeout: time.Second}), idle.Hooks{
		Close: func(idle.Reason) { t.Error("closed: the output drains every 300ms") },
	})
	require.NoError(t, err)
	defer tr.Stop()
	allocs := testing.AllocsPerRun(1000, func() {
		tr.Written()
		clk.Advance(300 * time.Millisecond)
		tr.Drained()
	})
	assert.Zero(t, allocs)
	assert.Equal(t, idle.ReasonNone, tr.Reason())
}

// TestTracker_WriteStallBytes: a write-stall timeout adds its writeWatch
// (104 bytes, in the 112-byte class) and its timer's callback (16) to what
// NewTracker allocates (see TestTracker_BytesPerNew).
func TestTracker_WriteStallBytes(t *testing.T) {
	cfg := only(idle.Config{IdleTimeout: time.Minute, WriteStallTimeout: 30 * time.Second})
	perNew := bytesPerNew(t, 5000, cfg)
	for range 2 {
		perNew = min(perNew, bytesPerNew(t, 5000, cfg))
	}
	assert.InDelta(t, 160+128, perNew, 4, "bytes allocated per NewTracker")
}
