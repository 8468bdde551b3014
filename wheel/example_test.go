package wheel_test

import (
	"fmt"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// A connection embeds its idle timer and pushes the deadline back on every
// packet; the wheel closes it when the peer goes quiet.
func Example() {
	clk := wheel.NewManualClock() // in production: wheel.New() on the real clock
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()

	type conn struct {
		idle wheel.Timer
		name string
	}
	c := &conn{name: "10.0.0.7:51234"}
	c.idle.Init(w, func() { fmt.Printf("%v: closing %s, idle\n", clk.Now(), c.name) })
	c.idle.Reset(30 * time.Second)

	for range 3 { // a packet every 10s keeps it open
		clk.Advance(10 * time.Second)
		c.idle.Reset(30 * time.Second)
	}
	clk.Advance(time.Minute)
	// Output:
	// 1m0s: closing 10.0.0.7:51234, idle
}

func ExampleTimer_Stop() {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	t := w.AfterFunc(time.Second, func() { fmt.Println("fired") })
	fmt.Println("stopped a pending timer:", t.Stop())
	fmt.Println("stopped again:", t.Stop())
	clk.Advance(time.Hour)
	fmt.Println("pending:", w.Len())
	// Output:
	// stopped a pending timer: true
	// stopped again: false
	// pending: 0
}

// Callbacks run on the wheel's goroutine; WithExecutor hands them elsewhere,
// here to a queue that the caller's own loop drains.
func ExampleWithExecutor() {
	clk := wheel.NewManualClock()
	var queue []func()
	w := wheel.New(wheel.WithClock(clk), wheel.WithExecutor(func(f func()) { queue = append(queue, f) }))
	w.AfterFunc(5*time.Millisecond, func() { fmt.Println("expired, run by the caller's loop") })
	clk.Advance(5 * time.Millisecond)
	fmt.Println("queued:", len(queue))
	for _, f := range queue {
		f()
	}
	// Output:
	// queued: 1
	// expired, run by the caller's loop
}

// An event loop reads the clock once per batch of events (Now) and arms
// from that time: the deadline runs from the event's instant, and each
// arming reads no clock.
func ExampleTimer_ResetFrom() {
	clk := wheel.NewManualClock() // in production: wheel.New() on the real clock
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()

	var idle wheel.Timer
	idle.Init(w, func() { fmt.Printf("%v: idle\n", clk.Now()) })
	for range 3 { // an event every 10.5s; the last at 31.5s
		clk.Advance(10500 * time.Millisecond)
		now := w.Now() // once per event
		idle.ResetFrom(now, 30*time.Second)
	}
	clk.Advance(time.Minute)
	// Output:
	// 1m1.5s: idle
}

// A tick from a flag is checked with Validate before New, which would panic.
func ExampleValidate() {
	tick := 50 * time.Microsecond // say, from -tick
	if err := wheel.Validate(wheel.WithTick(tick)); err != nil {
		fmt.Println(err)
	}
	// Output:
	// wheel: tick out of range: 50µs not in [100µs, 1h0m0s]
}
