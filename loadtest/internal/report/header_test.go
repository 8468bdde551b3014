package report

import (
	"bytes"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The header describes an external server by what the flags told (Known),
// not by the defaults the harness assumed, and names a raw protocol of the
// user's.
func TestText_HeaderOfAnExternalServer(t *testing.T) {
	assumed := Timeouts{Idle: 3 * time.Second, KeepaliveTime: 500 * time.Millisecond, KeepaliveTimeout: 500 * time.Millisecond,
		KeepaliveCount: 1, Frame: time.Second, InitialRTO: 100 * time.Millisecond, Tick: time.Millisecond, Slack: 500 * time.Millisecond}
	tests := []struct {
		name  string
		known *Timeouts
		want  string
	}{
		{name: "idle given", known: &Timeouts{Idle: 3 * time.Second, Slack: 500 * time.Millisecond}, want: "  server timeouts: idle 3s; slack 500ms"},
		{name: "nothing given", known: &Timeouts{Slack: 500 * time.Millisecond}, want: "  server timeouts: none given; slack 500ms"},
		{name: "embedded: all known", want: "  server timeouts: idle 3s, keepalive 500ms + 1x500ms, frame 1s, rto 100ms (min 0s, max 0s), 0 retransmits, give up after 0s; tick 1ms, slack 500ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Result{Version: Version, Config: Config{Server: "external", Target: "127.0.0.1:6379", Proto: "raw",
				Timeouts: assumed, Known: tt.known, Payload: "PING\r\n", Expect: `"+PONG\r\n"`}}
			var b bytes.Buffer
			Text(&b, r, r.Judge())
			lines := strings.Split(b.String(), "\n")
			require.Greater(t, len(lines), 3)
			assert.Equal(t, tt.want, lines[1])
			assert.Equal(t, `  each message "PING\r\n"; an answer: "+PONG\r\n"`, lines[2])
		})
	}
}

// verdict judges one scenario's figures alone and returns its failed
// checks' lines.
func verdict(s *Scenario) []string {
	return (&Result{Scenarios: []*Scenario{s}}).Judge().Scenario(s.Name).Lines()
}

// expectOf is the close the named scenario's connections expect.
func expectOf(name string) string {
	if sp := scenario.Lookup(name); sp != nil {
		return sp.Expect
	}
	return ""
}

// judgeOne returns s's failed checks and those not judged, in r.
func judgeOne(r *Result, s *Scenario) (failed, notJudged []Check) {
	v := r.Judge().Scenario(s.Name)
	return v.Failed, v.NotJudged
}
