package idle_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netwheel/netwheel/idle"
)

// Every reason has its own label, and only the timeouts say Timeout.
func TestReason_NamesAndTimeout(t *testing.T) {
	timeouts := map[idle.Reason]bool{
		idle.ReasonIdle: true, idle.ReasonDeadPeer: true, idle.ReasonKeepalive: true,
		idle.ReasonFrameDeadline: true, idle.ReasonHandshake: true, idle.ReasonWriteStall: true,
	}
	seen := map[string]idle.Reason{}
	for r := idle.Reason(0); int(r) < idle.NumReasons; r++ {
		name := r.String()
		assert.NotEqual(t, "unknown", name, "reason %d", r)
		if prev, dup := seen[name]; dup {
			t.Errorf("reasons %d and %d are both %q", prev, r, name)
		}
		seen[name] = r
		assert.Equal(t, timeouts[r], r.Timeout(), "%s", name)
	}
	assert.Equal(t, "unknown", idle.Reason(idle.NumReasons).String())
	assert.False(t, idle.Reason(idle.NumReasons).Timeout(), "an unknown reason is no timeout")
	assert.False(t, idle.ReasonMaxAge.Timeout(), "max age is not a timeout: nobody should retry it")
	for _, r := range idle.Reasons() {
		assert.True(t, r.Timeout() || r == idle.ReasonMaxAge, "a Tracker reports only its timeouts and max age, not %s", r)
	}
}
