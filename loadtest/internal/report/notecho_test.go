package report

import (
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestResult_NotEchoNote: the hint that a server may speak another protocol comes
// when the polite scenarios got nothing back, whatever a hostile peer that
// reads nothing saw.
func TestResult_NotEchoNote(t *testing.T) {
	external := Config{Server: "external", Proto: "raw"}
	scen := func(name string, hostile bool, sent, recv uint64) *Scenario {
		s := NewScenario(name, scenario.Lookup(name).Expect)
		s.Hostile, s.Sent, s.Recv = hostile, sent, recv
		return s
	}
	tests := []struct {
		name     string
		figs     []*Scenario
		wantNote bool
	}{
		{name: "echoed", figs: []*Scenario{scen("idle", false, 10, 10)}},
		{name: "nothing echoed", figs: []*Scenario{scen("idle", false, 10, 0)}, wantNote: true},
		{name: "a nonreader reads nothing, the rest was echoed",
			figs: []*Scenario{scen("idle", false, 10, 10), scen("nonreader", true, 1000, 0)}},
		{name: "nothing echoed beside a nonreader",
			figs: []*Scenario{scen("idle", false, 10, 0), scen("nonreader", true, 1000, 0)}, wantNote: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&Result{Config: external, Scenarios: tt.figs}).NotEchoNote()
			if tt.wantNote {
				assert.Contains(t, got, "no message was echoed")
			} else {
				assert.Empty(t, got)
			}
		})
	}
	assert.Empty(t, (&Result{Config: Config{Server: "netwheel", Proto: "raw"}, Scenarios: []*Scenario{scen("idle", false, 10, 0)}}).NotEchoNote(),
		"the embedded server is an echo server")
}
