package wheel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRelease_StopOfArmingInFlight steps through the interleaving where a
// Stop lands between an arming's compare-and-swap and its push: the Stop
// sees the timer queued and pushes nothing, while the driver is awake; the
// driver then plans a long sleep and finds the inbox empty; the arming's
// push lands last. The stopped timer must not stay on the inbox for the
// whole sleep: the push must wake the driver.
func TestRelease_StopOfArmingInFlight(t *testing.T) {
	now := int64(time.Second)
	w := NewSimulated(func() int64 { return now }, WithTick(time.Millisecond))
	defer w.Stop()
	held := w.AfterFunc(10*time.Second, func() {})
	defer held.Stop()
	w.Step()

	tm := new(Timer)
	tm.Init(w, func() {})
	// The arming's compare-and-swap, as Reset of a stopped timer does it.
	want := w.exactWhen(now, time.Hour, w.tickOf(now))<<whenShift | stateExact | statePending
	require.True(t, tm.state.CompareAndSwap(tm.state.Load(), want|stateQueued))
	// The driver is awake (in a step) when the Stop comes.
	w.sleepUntil.Store(0)
	w.sleepLong.Store(false)
	require.True(t, tm.Stop())
	assert.False(t, w.WakeRequested(), "the driver is awake: nothing to wake")
	until := w.Step() // plans the sleep until held's slot; the inbox is empty
	require.Greater(t, until-now, 2*releaseDelay, "a long sleep")
	w.push(tm, want>>whenShift) // the arming's push lands
	assert.True(t, w.WakeRequested(), "the stopped timer would stay referenced for %v", time.Duration(until-now))
}
