package main

import (
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// TestNotEchoNote: the hint that a server may speak another protocol comes
// when the polite scenarios got nothing back, whatever a hostile peer that
// reads nothing saw.
func TestNotEchoNote(t *testing.T) {
	o := &options{addr: "127.0.0.1:6379", proto: attack.Raw}
	scen := func(name string, hostile bool, sent, recv uint64) *report.Scenario {
		s := report.NewScenario(name, scenario.Lookup(name).Expect)
		s.Hostile, s.Sent, s.Recv = hostile, sent, recv
		return s
	}
	tests := []struct {
		name     string
		figs     []*report.Scenario
		wantNote bool
	}{
		{name: "echoed", figs: []*report.Scenario{scen("idle", false, 10, 10)}},
		{name: "nothing echoed", figs: []*report.Scenario{scen("idle", false, 10, 0)}, wantNote: true},
		{name: "a nonreader reads nothing, the rest was echoed",
			figs: []*report.Scenario{scen("idle", false, 10, 10), scen("nonreader", true, 1000, 0)}},
		{name: "nothing echoed beside a nonreader",
			figs: []*report.Scenario{scen("idle", false, 10, 0), scen("nonreader", true, 1000, 0)}, wantNote: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := notEchoNote(o, tt.figs)
			if tt.wantNote {
				assert.Contains(t, got, "no message was echoed")
			} else {
				assert.Empty(t, got)
			}
		})
	}
	assert.Empty(t, notEchoNote(&options{proto: attack.Raw}, []*report.Scenario{scen("idle", false, 10, 0)}),
		"the embedded server is an echo server")
}
