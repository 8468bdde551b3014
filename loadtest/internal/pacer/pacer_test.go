package pacer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestPacer_Schedule(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		phase time.Duration
		n     uint64
		want  time.Duration
	}{
		{name: "first at phase", rate: 100, phase: 3 * time.Millisecond, n: 0, want: 3 * time.Millisecond},
		{name: "hundredth", rate: 100, n: 100, want: time.Second},
		{name: "third-rate no drift", rate: 3, n: 3_000_000, want: 1_000_000 * time.Second},
		{name: "fractional rate", rate: 0.5, n: 2, want: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(t0, tt.phase, tt.rate)
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.Offset(tt.n))
			assert.Equal(t, t0.Add(tt.want), p.At(tt.n))
		})
	}
}

func TestPacer_Due(t *testing.T) {
	p, err := New(t0, 5*time.Millisecond, 100) // at 5, 15, 25, ... ms
	require.NoError(t, err)
	steps := []struct {
		name    string
		elapsed time.Duration
		want    uint64
	}{
		{name: "before phase", elapsed: 4 * time.Millisecond, want: 0},
		{name: "exactly first", elapsed: 5 * time.Millisecond, want: 1},
		{name: "between", elapsed: 14 * time.Millisecond, want: 1},
		{name: "exactly second", elapsed: 15 * time.Millisecond, want: 2},
		{name: "one second in", elapsed: time.Second, want: 100},
		{name: "a stalled sender catches up all at once", elapsed: 10*time.Second + 5*time.Millisecond, want: 1001},
	}
	for _, s := range steps {
		assert.Equal(t, s.want, p.Due(s.elapsed), s.name)
	}
	assert.Equal(t, uint64(100), p.Count(time.Second), "messages in a 1 s run")
	assert.Zero(t, p.Count(0))
}

// TestPacer_OpenLoopLatency checks the property the pacer exists for: when
// the server stalls, latency measured from the schedule counts the stall for
// every message that should have been sent during it, as an open-loop
// client would see it, where a closed-loop client records one slow message.
func TestPacer_OpenLoopLatency(t *testing.T) {
	p, err := New(t0, 0, 10) // every 100 ms
	require.NoError(t, err)
	// The server answers instantly except for a stall from 1 s to 2 s, during
	// which nothing is answered; everything queued is answered at 2 s.
	stallFrom, stallTo := time.Second, 2*time.Second
	answer := func(sent time.Duration) time.Duration {
		if sent >= stallFrom && sent < stallTo {
			return stallTo
		}
		return sent
	}
	var over500ms int
	for n := range p.Count(3 * time.Second) {
		lat := answer(p.Offset(n)) - p.Offset(n)
		if lat >= 500*time.Millisecond {
			over500ms++
		}
	}
	assert.Equal(t, 6, over500ms, "messages scheduled at 1.0, 1.1, ..., 1.5 s waited at least 500 ms")
}

func TestNew_RejectsBadRates(t *testing.T) {
	for _, r := range []float64{0, -1} {
		_, err := New(t0, 0, r)
		assert.ErrorIs(t, err, ErrRate)
	}
}

func TestPhase_Spreads(t *testing.T) {
	assert.Equal(t, time.Duration(0), Phase(0, 4, 10))
	assert.Equal(t, 25*time.Millisecond, Phase(1, 4, 10))
	assert.Equal(t, 75*time.Millisecond, Phase(3, 4, 10))
	assert.Zero(t, Phase(1, 0, 10))
}
