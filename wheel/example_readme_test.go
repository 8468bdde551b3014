package wheel_test

import (
	"fmt"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// Example_readme is the README's "Embed the wheel" snippet, word for word
// (internal/readme checks it): an idle timer embedded in a connection, on
// the real clock.
func Example_readme() {
	w := wheel.New() // 1 ms tick, on the monotonic clock
	defer w.Stop()   // no callback runs after Stop returns

	type conn struct {
		idle wheel.Timer // embedded: arming it allocates nothing
		// ... the rest of the connection
	}
	c := &conn{}
	closed := make(chan time.Time, 1)
	c.idle.Init(w, func() { closed <- time.Now() }) // on the wheel's goroutine: must not block

	start := time.Now()
	c.idle.Reset(50 * time.Millisecond) // reads the monotonic clock, rounds up to the tick

	// An event loop reads the clock once per batch of events and arms
	// every timer of the batch from that instant: a few ns, no clock read.
	now := w.Now()
	c.idle.ResetFrom(now, 50*time.Millisecond)

	fmt.Println("closed, never early:", (<-closed).Sub(start) >= 50*time.Millisecond)
	// Output:
	// closed, never early: true
}
