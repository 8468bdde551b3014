package idle_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/wheel"
)

// A connection with an idle timeout and gRPC-style keepalive, driven by a
// manual clock: pongs answer probes but do not count as activity.
func Example() {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()

	tr, err := idle.NewTracker(w, idle.Config{
		IdleTimeout:      55 * time.Second,
		KeepaliveTime:    20 * time.Second,
		KeepaliveTimeout: 5 * time.Second,
	}, idle.Hooks{
		Probe: func() { fmt.Println(clk.Now(), "probe sent") },
		Close: func(r idle.Reason) { fmt.Println(clk.Now(), "close:", r) },
	})
	if err != nil {
		panic(err)
	}
	tr.HandshakeDone() // no handshake to wait for (DefaultHandshakeTimeout)
	clk.Advance(10 * time.Second)
	tr.Received() // a request: bytes in, and activity
	for range 3 {
		clk.Advance(20 * time.Second)
		tr.BytesIn() // the pong: answers the probe, is not activity
	}
	// Output:
	// 30s probe sent
	// 50s probe sent
	// 1m5s close: idle
}

// A slowloris defence: the frame deadline is absolute, so trickling bytes
// do not extend it. The handshake deadline, on by default, is turned off
// here so that only the frame deadline is shown.
func ExampleTracker_FrameStart() {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	tr, _ := idle.NewTracker(w, idle.Config{FrameTimeout: 10 * time.Second, HandshakeTimeout: idle.Off},
		idle.Hooks{Close: func(r idle.Reason) { fmt.Println(clk.Now(), "close:", r) }})
	for range 20 { // one byte a second
		tr.FrameStart()
		tr.BytesIn()
		clk.Advance(time.Second)
	}
	// Output:
	// 10s close: frame_deadline
}

func ExampleConfig_Validate() {
	err := idle.Config{ReadSilenceTimeout: 30 * time.Second,
		KeepaliveTime: time.Minute, KeepaliveTimeout: 10 * time.Second}.Validate()
	fmt.Println(errors.Is(err, idle.ErrKeepalive))
	fmt.Println(err)
	// Output:
	// true
	// idle: keepalive settings cannot work: KeepaliveTime 1m0s is not below ReadSilenceTimeout 30s, so no probe is ever sent
}
