package idle_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// TestTracker_Concurrent hammers trackers from reader and writer goroutines
// on a real wheel while their short timeouts fire and Stop races with them:
// each tracker ends exactly once (a close or a Stop) and releases its timers.
func TestTracker_Concurrent(t *testing.T) {
	w := wheel.New()
	defer w.Stop()
	const n = 200
	var closes [n]atomic.Int32
	cfg := only(idle.Config{IdleTimeout: 3 * time.Millisecond, FrameTimeout: 2 * time.Millisecond,
		WriteStallTimeout: 2 * time.Millisecond, KeepaliveTime: time.Millisecond, KeepaliveTimeout: time.Millisecond,
		KeepaliveCount: 2})
	trs := make([]*idle.Tracker, n)
	for i := range trs {
		tr, err := idle.NewTracker(w, cfg, idle.Hooks{
			Close: func(idle.Reason) { closes[i].Add(1) },
			Probe: func() {},
		})
		require.NoError(t, err)
		trs[i] = tr
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(100 * time.Millisecond)
	for g := range 4 {
		wg.Go(func() {
			for k := 0; time.Now().Before(deadline); k++ {
				tr := trs[(k*7+g)%n]
				if g%2 == 0 {
					tr.FrameStart()
					tr.Received()
					tr.FrameEnd()
				} else {
					tr.Written()
					tr.Activity()
					tr.Drained()
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < n; i += 3 {
			trs[i].Stop()
		}
	})
	wg.Wait()
	for _, tr := range trs {
		tr.Stop()
	}
	assert.Eventually(t, func() bool { return w.Len() == 0 }, 5*time.Second, time.Millisecond,
		"pending timers left: %d", w.Len())
	// A close decided just before its tracker's Stop may still be calling
	// its hook on the wheel's goroutine (Stop does not wait for it); the
	// wheel's Stop does, so the counts below are final.
	w.Stop()
	for i, tr := range trs {
		if tr.Reason() == idle.ReasonNone {
			assert.Zero(t, closes[i].Load(), "tracker %d stopped yet closed", i)
		} else {
			assert.Equal(t, int32(1), closes[i].Load(), "tracker %d", i)
		}
	}
}
