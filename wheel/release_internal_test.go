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
	now += releaseDelay // the take after the one that took held in finds nothing
	w.Step()

	tm := new(Timer)
	tm.Init(w, func() {})
	// The arming's compare-and-swap, as Reset of a stopped timer does it.
	want := w.when(now, time.Hour)<<whenShift | statePending
	require.True(t, tm.state.CompareAndSwap(tm.state.Load(), want|stateQueued))
	// The driver is awake (in a step) when the Stop comes.
	w.sleepUntil.Store(0)
	w.sleepLong.Store(false)
	require.True(t, tm.Stop())
	assert.False(t, w.WakeRequested(), "the driver is awake: nothing to wake")
	until := w.Step() // plans the sleep until held's slot; the inbox is empty
	require.Greater(t, until-now, 2*releaseDelay, "a long sleep")
	w.push(tm) // the arming's push lands
	assert.True(t, w.WakeRequested(), "the stopped timer would stay referenced for %v", time.Duration(until-now))
}

// TestRelease_EarlierArmingWhileArmingInFlight: an arming for 2 h has set
// the queued bit, and its push is in flight, when an arming for 10 ms finds
// the timer queued while the driver is awake: its own check sees nothing
// to wake; the driver plans a long sleep and finds the inbox empty; the
// first arming's push lands. That push must check the deadline the timer
// has now, not the one it was pushed for.
func TestRelease_EarlierArmingWhileArmingInFlight(t *testing.T) {
	now := int64(time.Second) + 7
	w := NewSimulated(func() int64 { return now }, WithTick(time.Millisecond))
	defer w.Stop()
	held := w.AfterFunc(time.Hour, func() {})
	defer held.Stop()
	now += int64(2 * time.Second)
	w.Step()
	now += releaseDelay
	require.Greater(t, w.Step(), now+int64(time.Minute), "a long sleep")

	tm := new(Timer)
	tm.Init(w, func() {})
	far := w.when(now, 2*time.Hour)<<whenShift | statePending
	require.True(t, tm.state.CompareAndSwap(tm.state.Load(), far|stateQueued)) // the first arming's CAS
	w.sleepUntil.Store(0)                                                      // the driver is awake
	w.sleepLong.Store(false)
	start := w.Now()
	tm.ResetFrom(start, 10*time.Millisecond)
	until := w.Step()
	w.push(tm) // the first arming's push lands
	assert.True(t, w.WakeRequested() || until <= int64(start)+int64(20*time.Millisecond),
		"a timer due in 10 ms waits for the driver's sleep of %v", time.Duration(until-now))
}

// TestRelease_ArmingWhileStopInFlight is the same with a Stop's push in
// flight, while the driver plans a sleep shorter than ReleaseDelay (so the
// stop's own release check would not wake it) but longer than the new
// deadline.
func TestRelease_ArmingWhileStopInFlight(t *testing.T) {
	now := int64(time.Second) + 7
	w := NewSimulated(func() int64 { return now }, WithTick(time.Millisecond))
	defer w.Stop()
	tm := new(Timer)
	tm.Init(w, func() {})
	tm.ResetFrom(w.Now(), time.Hour)
	now += int64(2 * time.Second)
	w.Step()
	w.Step()
	w.AfterFunc(900*time.Millisecond, func() {})
	w.Step()
	s := tm.state.Load()
	require.True(t, tm.state.CompareAndSwap(s, s&^statePending|stateQueued)) // the Stop's CAS
	w.sleepUntil.Store(0)
	w.sleepLong.Store(false)
	start := w.Now()
	tm.ResetFrom(start, 10*time.Millisecond)
	until := w.Step()
	w.push(tm) // the Stop's push lands
	assert.True(t, w.WakeRequested() || until <= int64(start)+int64(10*time.Millisecond),
		"a timer due in 10 ms waits for the driver's sleep of %v", time.Duration(until-now))
}
