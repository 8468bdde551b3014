package retransmit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/retransmit"
)

// TestConfig_DeadlineBelowTick: on a wheel of a given tick, a deadline
// shorter than the tick, which the wheel cannot keep, is refused with the
// words idle and netserver use: the RTO's cap and first value, and the
// give-up time. MinRTO is a floor, which the tick's granularity covers.
// WithDefaults(0) (Validate, a standalone Estimator) knows no wheel and
// checks none.
func TestConfig_DeadlineBelowTick(t *testing.T) {
	const tick = time.Millisecond
	tests := []struct {
		name  string
		cfg   retransmit.Config
		field string // "" for accepted
	}{
		{name: "give-up time below the tick", cfg: retransmit.Config{GiveUpAfter: time.Microsecond}, field: "GiveUpAfter"},
		{name: "RTO cap below the tick", cfg: retransmit.Config{MinRTO: time.Microsecond, MaxRTO: 500 * time.Microsecond}, field: "MaxRTO"},
		{name: "first RTO below the tick", cfg: retransmit.Config{InitialRTO: time.Microsecond, MinRTO: time.Microsecond}, field: "InitialRTO"},
		{name: "RTO floor below the tick", cfg: retransmit.Config{MinRTO: time.Microsecond}},
		{name: "give-up time off", cfg: retransmit.Config{GiveUpAfter: retransmit.Off}},
		{name: "at the tick", cfg: retransmit.Config{InitialRTO: tick, MinRTO: tick, MaxRTO: tick, GiveUpAfter: tick}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.WithDefaults(tick)
			if tt.field == "" {
				assert.NoError(t, err)
			} else {
				require.ErrorIs(t, err, retransmit.ErrInvalidConfig)
				assert.Contains(t, err.Error(), tt.field+" ")
				assert.Contains(t, err.Error(), "shorter than the timer wheel's tick")
			}
			assert.NoError(t, tt.cfg.Validate(), "Validate knows no wheel")
		})
	}
}
