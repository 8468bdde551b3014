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

// TestResult_DialLimits: a limit names each scenario whose dials hit the
// open-file limit or ran out of ports; other dial errors are no limit of
// the harness's.
func TestResult_DialLimits(t *testing.T) {
	echo, idle := NewScenario("echo", ""), NewScenario("idle", "idle")
	echo.DialErrors["fd_limit"], echo.DialErrors["refused"] = 3, 5
	idle.DialErrors["ephemeral_ports"] = 2
	r := &Result{Scenarios: []*Scenario{echo, idle}}
	assert.Equal(t, []string{
		"echo: 3 connections hit the open-file limit; use -addr with the server in another process, or -shard",
		"idle: 2 connections ran out of ephemeral ports; use -shard over several hosts",
	}, r.DialLimits())
	echo.DialErrors["fd_limit"], idle.DialErrors["ephemeral_ports"] = 0, 0
	assert.Empty(t, r.DialLimits(), "refused: the server's doing")
}
