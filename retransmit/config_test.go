package retransmit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

func TestConfig_Invalid(t *testing.T) {
	tests := []struct {
		name    string
		cfg     retransmit.Config
		mention string
	}{
		{name: "negative initial", cfg: retransmit.Config{InitialRTO: -1}, mention: "InitialRTO"},
		{name: "negative min", cfg: retransmit.Config{MinRTO: -time.Millisecond}, mention: "MinRTO"},
		{name: "negative max", cfg: retransmit.Config{MaxRTO: -time.Second}, mention: "MaxRTO"},
		{name: "negative granularity", cfg: retransmit.Config{Granularity: -1}, mention: "Granularity"},
		{name: "huge max", cfg: retransmit.Config{MaxRTO: retransmit.MaxSample + 1}, mention: "MaxRTO"},
		{name: "min above max", cfg: retransmit.Config{MinRTO: 2 * time.Second, MaxRTO: time.Second}, mention: "exceeds MaxRTO"},
		{name: "min above default max", cfg: retransmit.Config{MinRTO: 61 * time.Second}, mention: "exceeds MaxRTO"},
		{name: "unknown variant", cfg: retransmit.Config{Variant: 7}, mention: "Variant(7)"},
		{name: "negative window", cfg: retransmit.Config{Window: -1}, mention: "Window -1 is negative: 0 means the default, and it cannot be off"},
		{name: "initial off", cfg: retransmit.Config{InitialRTO: retransmit.Off}, mention: "InitialRTO -1ns is negative: 0 means the default, and it cannot be off"},
		{name: "retransmits typo", cfg: retransmit.Config{MaxRetransmits: -5}, mention: "MaxRetransmits -5 is negative: 0 means the default, -1 (Off) turns it off"},
		{name: "give-up typo", cfg: retransmit.Config{GiveUpAfter: -time.Second}, mention: "GiveUpAfter -1s is negative: 0 means the default, -1 (Off) turns it off"},
		{name: "window too big", cfg: retransmit.Config{Window: retransmit.MaxWindow + 1}, mention: "Window"},
	}
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	defer w.Stop()
	h := retransmit.Hooks{Retransmit: func(uint64, int) {}, GiveUp: func(error) {}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := retransmit.NewEstimator(tt.cfg)
			require.Error(t, err)
			assert.ErrorIs(t, err, retransmit.ErrInvalidConfig)
			assert.True(t, strings.HasPrefix(err.Error(), "retransmit: invalid config: "), err.Error())
			assert.Contains(t, err.Error(), tt.mention)
			_, err = retransmit.NewTracker(w, tt.cfg, h)
			assert.ErrorIs(t, err, retransmit.ErrInvalidConfig)
			assert.ErrorIs(t, tt.cfg.Validate(), retransmit.ErrInvalidConfig)
		})
	}
}

// WithDefaults is the one place the defaults are applied: zero fields take
// them, Off stays off, Granularity follows the wheel's tick, and a
// resolved Config resolves to itself.
func TestConfig_WithDefaults(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		cfg  retransmit.Config
		tick time.Duration
		want retransmit.Config
	}{
		{name: "zero", want: retransmit.Config{InitialRTO: retransmit.DefaultInitialRTO, MinRTO: retransmit.DefaultMinRTO,
			MaxRTO: retransmit.DefaultMaxRTO, Granularity: wheel.DefaultTick, MaxRetransmits: retransmit.DefaultMaxRetransmits,
			GiveUpAfter: retransmit.DefaultGiveUpAfter, Window: retransmit.DefaultWindow}},
		{name: "tick is the granularity", tick: 10 * ms, want: retransmit.Config{InitialRTO: time.Second, MinRTO: 200 * ms,
			MaxRTO: time.Minute, Granularity: 10 * ms, MaxRetransmits: 10, GiveUpAfter: 30 * time.Second, Window: 1024}},
		{name: "off stays off, initial clamped",
			cfg: retransmit.Config{InitialRTO: 50 * ms, Variant: retransmit.Linux, MaxRetransmits: retransmit.Off, GiveUpAfter: retransmit.Off, Window: 8},
			want: retransmit.Config{InitialRTO: 200 * ms, MinRTO: 200 * ms, MaxRTO: time.Minute, Granularity: ms, Variant: retransmit.Linux,
				MaxRetransmits: retransmit.Off, GiveUpAfter: retransmit.Off, Window: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.WithDefaults(tt.tick)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := got.WithDefaults(tt.tick)
			require.NoError(t, err)
			assert.Equal(t, got, again, "resolves to itself")
		})
	}
}

func TestNewTracker_Invalid(t *testing.T) {
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	defer w.Stop()
	ok := retransmit.Hooks{Retransmit: func(uint64, int) {}, GiveUp: func(error) {}}
	_, err := retransmit.NewTracker(nil, retransmit.Config{}, ok)
	assert.ErrorIs(t, err, retransmit.ErrInvalidConfig)
	_, err = retransmit.NewTracker(w, retransmit.Config{}, retransmit.Hooks{GiveUp: ok.GiveUp})
	assert.ErrorIs(t, err, retransmit.ErrInvalidConfig)
	_, err = retransmit.NewTracker(w, retransmit.Config{}, retransmit.Hooks{Retransmit: ok.Retransmit})
	assert.ErrorIs(t, err, retransmit.ErrInvalidConfig)
}

func TestEstimator_Defaults(t *testing.T) {
	e, err := retransmit.NewEstimator(retransmit.Config{})
	require.NoError(t, err)
	assert.Equal(t, time.Second, e.RTO(), "initial RTO")
	assert.Zero(t, e.SRTT())
	assert.Zero(t, e.RTTVar())
	assert.Zero(t, e.Samples())
	// A 1 ms sample: SRTT + max(G=1ms, 4*0.5ms) = 3 ms, raised to the 200 ms floor.
	require.True(t, e.Sample(time.Millisecond))
	assert.Equal(t, 200*time.Millisecond, e.RTO())
	// 200 ms doubled 9 times is 102.4 s: capped at the 60 s default after 9.
	for range 8 {
		e.Backoff()
	}
	assert.Equal(t, 51200*time.Millisecond, e.RTO())
	assert.Equal(t, 60*time.Second, e.Backoff())
}

func TestEstimator_BackoffSaturates(t *testing.T) {
	e, err := retransmit.NewEstimator(retransmit.Config{MinRTO: 1, MaxRTO: retransmit.MaxSample})
	require.NoError(t, err)
	prev := e.RTO()
	for i := range 200 {
		rto := e.Backoff()
		require.GreaterOrEqual(t, rto, prev, "backoff %d", i)
		require.LessOrEqual(t, rto, retransmit.MaxSample, "backoff %d", i)
		prev = rto
	}
	assert.Equal(t, retransmit.MaxSample, e.RTO())
	assert.Equal(t, 200, e.Backoffs())
}

func TestEstimator_SampleClampedToMaxSample(t *testing.T) {
	e, err := retransmit.NewEstimator(retransmit.Config{})
	require.NoError(t, err)
	require.True(t, e.Sample(time.Duration(1<<62)))
	assert.Equal(t, retransmit.MaxSample, e.LatestRTT())
	assert.Equal(t, retransmit.MaxSample, e.SRTT())
	assert.Equal(t, 60*time.Second, e.RTO())
}

func TestGiveUpError_Is(t *testing.T) {
	for _, limit := range []error{retransmit.ErrMaxRetransmits, retransmit.ErrUnackedTimeout} {
		var err error = &retransmit.GiveUpError{Limit: limit, Seq: 9, Retransmits: 3, Unacked: time.Second}
		assert.ErrorIs(t, err, retransmit.ErrGiveUp)
		assert.ErrorIs(t, err, limit)
		assert.NotErrorIs(t, err, retransmit.ErrWindowFull)
		assert.True(t, strings.HasPrefix(err.Error(), "retransmit: give up on seq 9"), err.Error())
		assert.Contains(t, err.Error(), limit.Error())
		var g *retransmit.GiveUpError
		require.True(t, errors.As(err, &g))
		assert.Equal(t, uint64(9), g.Seq)
	}
	assert.NotErrorIs(t, &retransmit.GiveUpError{Limit: retransmit.ErrMaxRetransmits}, retransmit.ErrUnackedTimeout)
}

func TestVariant_String(t *testing.T) {
	assert.Equal(t, "rfc6298", retransmit.RFC6298.String())
	assert.Equal(t, "linux", retransmit.Linux.String())
	assert.Equal(t, "Variant(9)", retransmit.Variant(9).String())
}

// Off turns the give-up limits off: with both off, the Tracker keeps
// retransmitting, well past the default counts and times, and never gives up.
func TestTracker_GiveUpLimitsOff(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	retx := 0
	tr, err := retransmit.NewTracker(w, retransmit.Config{MaxRetransmits: retransmit.Off, GiveUpAfter: retransmit.Off,
		MaxRTO: time.Second}, retransmit.Hooks{
		Retransmit: func(uint64, int) { retx++ },
		GiveUp:     func(err error) { t.Errorf("gave up: %v", err) },
	})
	require.NoError(t, err)
	defer tr.Stop()
	require.NoError(t, tr.Sent(1, w.Now()))
	for range 4 * retransmit.DefaultMaxRetransmits {
		clk.Advance(time.Second)
	}
	assert.GreaterOrEqual(t, retx, 2*retransmit.DefaultMaxRetransmits)
	assert.Greater(t, clk.Now(), retransmit.DefaultGiveUpAfter)
}

// Each give-up limit off leaves the other on.
func TestTracker_OneGiveUpLimitOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   retransmit.Config
		limit error
	}{
		{name: "count off, time on", cfg: retransmit.Config{MaxRetransmits: retransmit.Off, GiveUpAfter: 5 * time.Second,
			MaxRTO: time.Second}, limit: retransmit.ErrUnackedTimeout},
		{name: "time off, count on", cfg: retransmit.Config{MaxRetransmits: 3, GiveUpAfter: retransmit.Off,
			MaxRTO: time.Second}, limit: retransmit.ErrMaxRetransmits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := wheel.NewManualClock()
			w := wheel.New(wheel.WithClock(clk))
			defer w.Stop()
			var gaveUp error
			tr, err := retransmit.NewTracker(w, tc.cfg, retransmit.Hooks{
				Retransmit: func(uint64, int) {},
				GiveUp:     func(err error) { gaveUp = err },
			})
			require.NoError(t, err)
			defer tr.Stop()
			require.NoError(t, tr.Sent(1, w.Now()))
			for range 60 {
				clk.Advance(time.Second)
			}
			assert.ErrorIs(t, gaveUp, tc.limit)
		})
	}
}
