package wheel_test

// Simulated-driver tests of how often the wheel's goroutine wakes: pushes
// must not wake it for nothing, and past the clock's end it must not spin.

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/wheel"
)

const us = int64(time.Microsecond)

// stepTo steps the driver at the times it plans to wake (filing timers down
// the levels on the way) until it plans to wake at or after at, and returns
// that plan.
func stepTo(w *wheel.Wheel, now *int64, at int64) int64 {
	for {
		wake := w.Step()
		if wake >= at {
			return wake
		}
		*now = wake
	}
}

// TestSimulated_ArmingsAtPlannedSlotNoWake: the driver plans to wake at
// tick 3002 for a timer armed with Reset. Twenty armings due at that tick,
// pushed within one tick, must not wake it (each would wake it once: it
// files the timer in that slot and plans the same wake-up again); they fire
// with the slot, at their tick. An arming due a tick earlier still wakes
// it, and fires at its tick.
func TestSimulated_ArmingsAtPlannedSlotNoWake(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	w.SetCanPrecise(false) // one planned wake-up per fire, not two
	firstAt := int64(-1)
	var first wheel.Timer
	first.Init(w, func() { firstAt = now })
	first.Reset(3001*time.Millisecond + 500*time.Microsecond) // tick 3002
	require.Equal(t, 3002*ms, stepTo(w, &now, 3000*ms), "the driver plans to wake for the slot")
	now = 3000*ms + 50*us

	firedAt := make([]int64, 20)
	timers := make([]wheel.Timer, len(firedAt))
	wakes := 0
	for i := range timers {
		now += 30 * us
		firedAt[i] = -1
		timers[i].Init(w, func() { firedAt[i] = now })
		if i%2 == 0 {
			timers[i].ResetFrom(w.Now(), 1100*time.Microsecond) // tick 3002
		} else {
			timers[i].Reset(1100 * time.Microsecond)
		}
		if w.WakeRequested() {
			wakes++
			w.Step()
		}
	}
	assert.Zero(t, wakes, "%d armings due at tick 3002 woke the driver, which plans to wake then", len(timers))

	earlyAt := int64(-1)
	var early wheel.Timer
	early.Init(w, func() { earlyAt = now })
	early.Reset(100 * time.Microsecond) // tick 3001
	require.True(t, w.WakeRequested(), "a deadline a tick before the planned wake-up must wake the driver")
	now = w.Step()
	require.Equal(t, 3001*ms, now, "a timer is due at its tick")
	require.Equal(t, 3002*ms, w.Step())
	assert.Equal(t, 3001*ms, earlyAt, "fired at its tick")
	now = 3002 * ms
	w.Step()
	assert.Equal(t, 3002*ms, firstAt)
	for i, at := range firedAt {
		assert.Equal(t, 3002*ms, at, "timer %d: with the slot, at its tick", i)
	}
}

// TestSimulated_ArmingBeforeLeadIn: the driver, which may sleep precisely,
// plans to wake preciseLead (2 ms) before a timer at tick 3002, on the
// runtime's timer, which may end a millisecond late, and then sleep the rest
// precisely. An arming due between that wake-up and tick 3002 need not wake
// it: it plans a precise sleep to the arming's tick when it wakes. An
// arming due before the lead-in wake-up must wake it, so that it plans a
// precise sleep to that tick instead of finding the timer up to a
// millisecond late.
func TestSimulated_ArmingBeforeLeadIn(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	w.SetCanPrecise(true)
	var far wheel.Timer
	far.Init(w, func() {})
	far.Reset(3002 * time.Millisecond) // tick 3002
	stepTo(w, &now, 2998*ms)
	now = 2998*ms + 50*us
	require.Equal(t, 3000*ms, w.Step(), "a sleep on the runtime's timer to preciseLead before the timer")

	inAt := int64(-1)
	var in wheel.Timer
	in.Init(w, func() { inAt = now })
	in.ResetFrom(w.Now(), 2500*time.Microsecond) // 3000.55 ms: tick 3001
	assert.False(t, w.WakeRequested(), "a deadline after the lead-in wake-up woke the driver")

	now += 30 * us
	firedAt := int64(-1)
	var early wheel.Timer
	early.Init(w, func() { firedAt = now })
	early.Reset(900 * time.Microsecond) // 2998.98 ms: tick 2999
	require.True(t, w.WakeRequested(), "a deadline before a wake-up that may end late must wake the driver")
	wake, precise := w.StepPlan()
	require.Equal(t, 2999*ms, wake, "woken, the driver plans to wake at the timer's tick")
	assert.True(t, precise, "within preciseLead: a precise sleep")
	now = wake
	wake, precise = w.StepPlan()
	assert.Equal(t, 2999*ms, firedAt, "fired at its tick")
	require.Equal(t, 3001*ms, wake, "then a precise sleep to the next tick due")
	assert.True(t, precise)
	now = wake
	w.Step()
	assert.Equal(t, 3001*ms, inAt, "fired at its tick")
}

// TestSimulated_HorizonDoesNotSpin starts a wheel past its clock's last
// tick (7 years at MinTick) and arms there: a deadline past the clock's end
// is never reached, so the driver must neither plan to wake at a tick that
// never comes (a wake-up already past: it would step again at once,
// forever) nor fire it. The driver here wakes when it planned to, or at
// once if that has passed, after 1 µs of work a step.
func TestSimulated_HorizonDoesNotSpin(t *testing.T) {
	tick := int64(wheel.MinTick)
	end := (int64(1)<<41 - 2) * tick // the clock's last tick
	now := end + 5*tick
	w := wheel.NewSimulated(func() int64 { return now }, wheel.WithTick(wheel.MinTick))
	t.Cleanup(w.Stop)
	w.Step()
	var tm wheel.Timer
	tm.Init(w, func() { t.Error("a timer armed past the clock's end fired") })
	tm.Reset(time.Second)

	spins, steps := 0, 0
	for range 100 {
		until := w.Step()
		steps++
		if until == math.MaxInt64 {
			break // asleep until woken
		}
		if until <= now {
			spins++
		}
		now = max(until, now+us)
	}
	require.Zero(t, spins, "of %d steps, %d planned a wake-up that had already passed", steps, spins)
	tm.Reset(time.Minute)
	assert.False(t, w.WakeRequested(), "a later deadline past the clock's end woke the driver")
	assert.True(t, tm.Pending())
}
