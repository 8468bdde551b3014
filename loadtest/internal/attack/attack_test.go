package attack

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/report"
)

func TestLadder(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		t      report.Timeouts
		want   []time.Duration
		giveUp time.Duration
	}{
		{name: "doubling until max retransmits", t: report.Timeouts{InitialRTO: 100 * ms, MinRTO: 50 * ms, MaxRetransmits: 3, GiveUpAfter: 5 * time.Second},
			want: []time.Duration{100 * ms, 300 * ms, 700 * ms}, giveUp: 1500 * ms},
		{name: "capped by max rto", t: report.Timeouts{InitialRTO: 100 * ms, MinRTO: 50 * ms, MaxRTO: 250 * ms, MaxRetransmits: 4, GiveUpAfter: 5 * time.Second},
			want: []time.Duration{100 * ms, 300 * ms, 550 * ms, 800 * ms}, giveUp: 1050 * ms},
		{name: "cut short by give-up time", t: report.Timeouts{InitialRTO: 100 * ms, MinRTO: 50 * ms, MaxRetransmits: 10, GiveUpAfter: 400 * ms},
			want: []time.Duration{100 * ms, 300 * ms}, giveUp: 400 * ms},
		{name: "initial rto clamped to min", t: report.Timeouts{InitialRTO: 10 * ms, MinRTO: 50 * ms, MaxRetransmits: 1, GiveUpAfter: time.Second},
			want: []time.Duration{50 * ms}, giveUp: 150 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, giveUp, err := Ladder(tt.t)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.giveUp, giveUp)
		})
	}
	_, _, err := Ladder(report.Timeouts{MinRTO: -1})
	assert.Error(t, err)
}

func TestDialErrKind(t *testing.T) {
	assert.Equal(t, "fd_limit", DialErrKind(fmt.Errorf("dial: %w", syscall.EMFILE)))
	assert.Equal(t, "ephemeral_ports", DialErrKind(fmt.Errorf("dial: %w", syscall.EADDRNOTAVAIL)))
	assert.Equal(t, "refused", DialErrKind(fmt.Errorf("dial: %w", syscall.ECONNREFUSED)))
	assert.Equal(t, "other", DialErrKind(errors.New("x")))
}

// verdict judges one scenario's figures alone and returns its failed
// checks' lines.
func verdict(s *report.Scenario) []string {
	return (&report.Result{Scenarios: []*report.Scenario{s}}).Judge().Scenario(s.Name).Lines()
}
