package netserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver"
)

// Every reason has a label of its own; the timeouts are idle's, value and
// label alike.
func TestReason_Labels(t *testing.T) {
	seen := map[string]netserver.Reason{netserver.ReasonNone.String(): netserver.ReasonNone}
	for _, r := range netserver.Reasons() {
		name := r.String()
		assert.NotEqual(t, "unknown", name, "reason %d", r)
		if prev, dup := seen[name]; dup {
			t.Errorf("reasons %d and %d are both %q", prev, r, name)
		}
		seen[name] = r
	}
	for _, r := range idle.Reasons() {
		assert.Equal(t, r.String(), netserver.Reason(r).String())
	}
	last := netserver.Reasons()[len(netserver.Reasons())-1]
	assert.Equal(t, "unknown", (last + 1).String())
}
