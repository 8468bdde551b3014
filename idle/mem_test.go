package idle_test

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// TestTracker_BytesPerNew holds what NewTracker allocates for each set of
// policies, in bytes (size classes, as the Go heap counts them): a server
// with a million connections pays it a million times. A Tracker is 144
// bytes (a size class of its own) and its policy timer's callback 16; a
// frame deadline adds a frameDeadline (72 bytes, in the 80-byte class) and
// its callback (16); read silence, keepalive and max age share one
// policies (80). TestTracker_WriteStallBytes holds the write stall's.
func TestTracker_BytesPerNew(t *testing.T) {
	const n = 5000
	tests := []struct {
		name      string
		cfg       idle.Config
		wantBytes int
	}{
		{name: "idle and handshake (cmd/echo raw)", cfg: only(idle.Config{IdleTimeout: 5 * time.Minute, HandshakeTimeout: 10 * time.Second}), wantBytes: 160},
		{name: "idle only", cfg: only(idle.Config{IdleTimeout: time.Minute}), wantBytes: 160},
		{name: "frame deadline", cfg: only(idle.Config{IdleTimeout: time.Minute, FrameTimeout: 30 * time.Second}), wantBytes: 160 + 96},
		{name: "keepalive", cfg: only(idle.Config{IdleTimeout: time.Minute, KeepaliveTime: 30 * time.Second, KeepaliveTimeout: 10 * time.Second}),
			wantBytes: 160 + 80},
		{name: "read silence and max age", cfg: only(idle.Config{ReadSilenceTimeout: time.Minute, MaxAge: time.Hour}), wantBytes: 160 + 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The least of three tries: the runtime may allocate a little
			// meanwhile (more under the race detector), never less.
			perNew := math.Inf(1)
			for range 3 {
				perNew = min(perNew, bytesPerNew(t, n, tt.cfg))
			}
			// One field too many costs a whole size-class step (16 bytes
			// or more).
			assert.InDelta(t, tt.wantBytes, perNew, 4, "bytes allocated per NewTracker")
		})
	}
}

// bytesPerNew returns the bytes allocated per NewTracker of n trackers with cfg.
func bytesPerNew(t *testing.T, n int, cfg idle.Config) float64 {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	hooks := idle.Hooks{Close: func(idle.Reason) {}, Probe: func() {}}
	trs := make([]*idle.Tracker, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range trs {
		tr, err := idle.NewTracker(w, cfg, hooks)
		require.NoError(t, err)
		trs[i] = tr
	}
	runtime.ReadMemStats(&after)
	for _, tr := range trs {
		tr.Stop()
	}
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}
