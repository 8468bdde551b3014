package report

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestScenarioAdd_RawEOF: a raw server closes without a reason, so its EOF
// counts as the close of each timeout a raw server can have (idle,
// handshake, request deadline), never as a framed server's, which must say
// why, and never for a dead peer, which needs the framed protocol's PINGs.
func TestScenarioAdd_RawEOF(t *testing.T) {
	exp := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	to := Timeouts{Tick: time.Millisecond, Slack: 100 * time.Millisecond}
	for _, tt := range []struct {
		proto, expect string
		reaped        bool
	}{
		{proto: "raw", expect: "idle", reaped: true},
		{proto: "raw", expect: "handshake", reaped: true},
		{proto: "raw", expect: "frame_deadline", reaped: true},
		{proto: "raw", expect: "dead_peer"},
		{proto: "framed", expect: "handshake"},
		{proto: "framed", expect: "frame_deadline"},
	} {
		t.Run(tt.proto+"/"+tt.expect, func(t *testing.T) {
			s := NewScenario("x", tt.expect)
			s.Proto = tt.proto
			s.Add(ConnResult{Expect: tt.expect, ExpectedAt: exp, End: "eof", ClosedAt: exp.Add(time.Millisecond)}, to, true)
			if tt.reaped {
				assert.Equal(t, 1, s.Closes.OnTime)
				assert.Empty(t, s.checks(to))
				return
			}
			assert.Equal(t, map[string]int{"eof": 1}, s.Closes.OtherReason)
			assert.Len(t, s.checks(to), 1)
		})
	}
	// The handshake close of a framed server says so.
	s := NewScenario("handshake", expectOf("handshake"))
	s.Proto = "framed"
	s.Add(ConnResult{Expect: "handshake", ExpectedAt: exp, End: "handshake", ClosedAt: exp.Add(time.Millisecond)}, to, true)
	assert.Equal(t, 1, s.Closes.OnTime)
	assert.Equal(t, "server timeouts: handshake 2s; slack 0s", Timeouts{Handshake: 2 * time.Second}.String())
}
