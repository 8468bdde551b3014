package wheel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManual_LenFiresNothing steps through the interleaving where a Reset
// on a manual wheel reads the clock, another goroutine's Advance passes the
// deadline it computed, and the Reset's arming lands after that: Len finds
// the timer due when it takes it in. Len must count it and leave it to the
// next Advance, which fires it at its first tick and ends the batch:
// callbacks run only inside Advance.
func TestManual_LenFiresNothing(t *testing.T) {
	c := NewManualClock()
	batches := 0
	w := New(WithClock(c), WithBatchEnd(func() { batches++ }))
	defer w.Stop()
	inAdvance := false
	firedAt := time.Duration(-1)
	var tm Timer
	tm.Init(w, func() {
		assert.True(t, inAdvance, "the callback ran outside Advance")
		firedAt = c.Now()
	})
	advance := func(d time.Duration) {
		inAdvance = true
		defer func() { inAdvance = false }()
		c.Advance(d)
	}

	const want = 1                                                  // Reset(1 ms) reads the clock at 0: tick 1
	advance(5 * time.Millisecond)                                   // another goroutine's Advance
	require.False(t, tm.arm(tm.state.Load(), want), "a new arming") // the Reset's compare-and-swap and push
	assert.Equal(t, 1, w.Len(), "Len takes the arming in and counts it")
	assert.Equal(t, time.Duration(-1), firedAt, "Len ran the callback")
	assert.Zero(t, batches)

	advance(time.Millisecond)
	assert.Equal(t, 6*time.Millisecond, firedAt, "the next Advance fires it at its first tick")
	assert.Equal(t, 1, batches, "and ends the batch")
	assert.Zero(t, w.Len())
}
