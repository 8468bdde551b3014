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

// TestSimulated_ExactArmingsBeforeLateSlot: the driver, not keeping the
// clock, plans to wake a quarter tick after tick 3002 for a slot holding a
// coarse timer. Twenty exact armings due at tick 3002, pushed within one
// tick, must not wake it (each would wake it once: it files the timer in
// that slot and plans the same wake-up again); they fire with the slot, a
// quarter tick after their tick. An arming due a tick earlier still wakes
// it, and fires at its tick.
func TestSimulated_ExactArmingsBeforeLateSlot(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	w.SetCanPrecise(false) // one planned wake-up per fire, not two
	coarseAt := int64(-1)
	var coarse wheel.Timer
	coarse.Init(w, func() { coarseAt = now })
	coarse.Reset(3001 * time.Millisecond) // read at tick 0: tick 3002
	for now < 1500*ms {
		now = min(w.Step(), 1500*ms) // on time: no hold-back
	}
	require.True(t, w.Stale(), "nothing reads the clock: the driver stops keeping it")
	now = 3000*ms + 50*us
	slotAt := 3002*ms + ms/4
	require.Equal(t, slotAt, w.Step(), "the driver plans to wake for the coarse slot")

	firedAt := make([]int64, 20)
	timers := make([]wheel.Timer, len(firedAt))
	wakes := 0
	for i := range timers {
		now += 30 * us // within tick 3000, on no tick boundary: exact
		firedAt[i] = -1
		timers[i].Init(w, func() { firedAt[i] = now })
		timers[i].ResetFrom(w.Elapsed(), 1100*time.Microsecond) // tick 3002
		if w.WakeRequested() {
			wakes++
			w.Step()
		}
	}
	assert.Zero(t, wakes, "%d armings due at tick 3002 woke the driver, which plans to wake a quarter tick after it", len(timers))

	earlyAt := int64(-1)
	var early wheel.Timer
	early.Init(w, func() { earlyAt = now })
	early.ResetFrom(w.Elapsed(), 100*time.Microsecond) // tick 3001
	require.True(t, w.WakeRequested(), "a deadline a tick before the planned wake-up must wake the driver")
	now = w.Step()
	require.Equal(t, 3001*ms, now, "an exact timer is due at its tick")
	require.Equal(t, slotAt, w.Step())
	assert.Equal(t, 3001*ms, earlyAt, "fired at its tick")
	now = slotAt
	w.Step()
	assert.Equal(t, slotAt, coarseAt, "the coarse timer, a quarter tick after its tick")
	for i, at := range firedAt {
		assert.Equal(t, slotAt, at, "exact timer %d: with the slot, a quarter tick after its tick", i)
	}
}

// TestSimulated_ExactArmingBeforeLongSleep: the driver, which may sleep
// precisely, plans to wake preciseLead (2 ms) before a coarse slot's fire
// at tick 3002 and a quarter, on the runtime's timer, which may end a
// millisecond late. An exact arming due at tick 3000, a quarter tick before
// that wake-up, must wake it, so that it plans a precise sleep to tick 3000
// instead of finding the timer up to a millisecond and a quarter late.
func TestSimulated_ExactArmingBeforeLongSleep(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	w.SetCanPrecise(true)
	var coarse wheel.Timer
	coarse.Init(w, func() {})
	coarse.Reset(3001 * time.Millisecond) // read at tick 0: tick 3002
	for now < 1500*ms {
		now = min(w.Step(), 1500*ms)
	}
	require.True(t, w.Stale(), "nothing reads the clock: the driver stops keeping it")
	now = 2999*ms + 50*us
	require.Equal(t, 3000*ms+ms/4, w.Step(), "a sleep on the runtime's timer to preciseLead before the slot's fire")

	now += 30 * us
	firedAt := int64(-1)
	var exact wheel.Timer
	exact.Init(w, func() { firedAt = now })
	exact.ResetFrom(w.Elapsed(), 900*time.Microsecond) // 2999.98 ms: tick 3000
	require.True(t, w.WakeRequested(), "a deadline before a wake-up that may end late must wake the driver")
	now = w.Step()
	require.Equal(t, 3000*ms, now, "woken, the driver plans to wake at the timer's tick")
	w.Step()
	assert.Equal(t, 3000*ms, firedAt, "fired at its tick")
}

// TestSimulated_ExactArmingsBeforeLateSlotLongTick: with a 20 ms tick the
// quarter-tick slack (5 ms) is longer than the precise sleep's lead (2
// ms), so the driver leads in to a late slot's fire with a sleep on the
// runtime's timer that ends after the slot's tick. Exact armings due at
// that tick join the slot and must not wake the driver, once per push;
// one due a tick earlier must.
func TestSimulated_ExactArmingsBeforeLateSlotLongTick(t *testing.T) {
	const tick = 20 * ms
	var now int64
	w := wheel.NewSimulated(func() int64 { return now }, wheel.WithTick(time.Duration(tick)))
	t.Cleanup(w.Stop)
	w.SetCanPrecise(true)
	var coarse wheel.Timer
	coarse.Init(w, func() {})
	coarse.Reset(time.Duration(3000 * tick)) // read at tick 0: tick 3001
	for now < 1500*tick {
		now = min(w.Step(), 1500*tick)
	}
	require.True(t, w.Stale(), "nothing reads the clock: the driver stops keeping it")
	now = 2999*tick + ms
	fire := 3001*tick + tick/4
	require.Equal(t, fire-2*ms, w.Step(), "a sleep on the runtime's timer, leading in to the slot's fire")

	wakes := 0
	timers := make([]wheel.Timer, 20)
	for i := range timers {
		now += 100 * us // within tick 2999: due at tick 3001
		timers[i].Init(w, func() {})
		timers[i].ResetFrom(w.Elapsed(), time.Duration(3001*tick-now))
		if w.WakeRequested() {
			wakes++
			w.Step()
		}
	}
	assert.Zero(t, wakes, "%d armings due at the late slot's tick woke the driver", len(timers))

	var early wheel.Timer
	early.Init(w, func() {})
	early.ResetFrom(w.Elapsed(), time.Duration(3000*tick-now)) // tick 3000
	assert.True(t, w.WakeRequested(), "a deadline a tick before the slot's must wake the driver")
}

// TestSimulated_KeepClockPushNoWake: a driver that keeps the clock sleeps
// to the next tick, and a push due at that tick must not wake it, even when
// the next tick happens to come preciseLead before an exact slot's fire (a
// sleep that only looks like a lead-in to it).
func TestSimulated_KeepClockPushNoWake(t *testing.T) {
	var now int64
	w := newSim(t, &now)
	w.SetCanPrecise(true)
	now = 100 * us
	var slot wheel.Timer
	slot.Init(w, func() {})
	slot.ResetFrom(w.Elapsed(), 2500*time.Microsecond) // tick 3: 2 ms after the next tick
	require.Equal(t, ms, w.Step(), "keeping the clock: the next tick")
	require.False(t, w.Stale())
	now = 150 * us
	var push wheel.Timer
	push.Init(w, func() {})
	push.ResetFrom(w.Elapsed(), 500*time.Microsecond) // tick 1, the next
	assert.False(t, w.WakeRequested(), "a push due at the next tick woke a driver that keeps the clock")
}

// TestSimulated_HorizonDoesNotSpin starts a wheel past its clock's last
// tick (7 years at MinTick) and reads the clock there: the clock is stopped
// for good, so the driver must neither plan to wake at a tick that never
// comes (a wake-up already past: it would step again at once, forever) nor
// be woken by every reader. The driver here wakes when it planned to, or at
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
	require.Equal(t, time.Duration(end), w.Now(), "the clock stops at its last tick")

	spins := 0
	for range 100 {
		until := w.Step()
		if until == math.MaxInt64 {
			break // asleep until woken
		}
		if until <= now {
			spins++
		}
		now = max(until, now+us)
	}
	require.Zero(t, spins, "of 100 steps, %d planned a wake-up that had already passed", spins)
	require.Equal(t, time.Duration(end), w.Now())
	assert.False(t, w.WakeRequested(), "a reader of the stopped clock woke the driver")
}
