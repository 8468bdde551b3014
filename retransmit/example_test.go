package retransmit_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

func ExampleEstimator() {
	e, _ := retransmit.NewEstimator(retransmit.Config{})
	fmt.Println("initial:", e.RTO())
	e.Sample(100 * time.Millisecond)
	// SRTT 100ms, RTTVAR 50ms: RTO = 100ms + max(1ms, 4*50ms).
	fmt.Println("first sample:", e.SRTT(), e.RTTVar(), e.RTO())
	e.Sample(140 * time.Millisecond)
	fmt.Println("second sample:", e.SRTT(), e.RTTVar(), e.RTO())
	for range 3 {
		fmt.Println("timeout:", e.Backoff())
	}
	e.Sample(120 * time.Millisecond) // a valid sample ends the backoff
	fmt.Println("after sample:", e.RTO(), "backoffs", e.Backoffs())
	// Output:
	// initial: 1s
	// first sample: 100ms 50ms 300ms
	// second sample: 105ms 47.5ms 295ms
	// timeout: 590ms
	// timeout: 1.18s
	// timeout: 2.36s
	// after sample: 264.375ms backoffs 0
}

func ExampleEstimator_linux() {
	rfc, _ := retransmit.NewEstimator(retransmit.Config{})
	linux, _ := retransmit.NewEstimator(retransmit.Config{Variant: retransmit.Linux})
	// A stable 300ms path: RTTVAR decays, and so does the RFC 6298 RTO;
	// Linux keeps MinRTO of headroom above SRTT.
	for range 20 {
		rfc.Sample(300 * time.Millisecond)
		linux.Sample(300 * time.Millisecond)
	}
	fmt.Println("rfc6298:", rfc.RTO())
	fmt.Println("linux:  ", linux.RTO())
	// Output:
	// rfc6298: 302.536964ms
	// linux:   500ms
}

// The default minimum RTO is Linux's 200 ms, under either Variant; RFC 6298
// section 2.4's 1 s floor takes MinRTO: time.Second.
func ExampleConfig_minRTO() {
	def, _ := retransmit.NewEstimator(retransmit.Config{}) // Variant RFC6298
	rfc, _ := retransmit.NewEstimator(retransmit.Config{MinRTO: time.Second})
	def.Sample(10 * time.Millisecond)
	rfc.Sample(10 * time.Millisecond)
	fmt.Println("default:", def.RTO())
	fmt.Println("MinRTO 1s:", rfc.RTO())
	// Output:
	// default: 200ms
	// MinRTO 1s: 1s
}

func ExampleTracker() {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()

	tr, _ := retransmit.NewTracker(w, retransmit.Config{MaxRetransmits: 2}, retransmit.Hooks{
		// On the wheel's goroutine: queue the resend on the connection's loop.
		Retransmit: func(seq uint64, attempt int) {
			fmt.Printf("%v: resend %d (attempt %d)\n", clk.Now(), seq, attempt)
		},
		GiveUp: func(err error) {
			fmt.Printf("%v: close: %v (max retransmits: %t)\n", clk.Now(), err,
				errors.Is(err, retransmit.ErrMaxRetransmits))
		},
		Sample: func(rtt time.Duration) { fmt.Printf("%v: rtt %v\n", clk.Now(), rtt) },
	})

	_ = tr.Sent(1, clk.Now())
	clk.Advance(40 * time.Millisecond)
	tr.AckedThrough(1, clk.Now()) // RTO becomes 40ms + 4*20ms, floored to 200ms

	_ = tr.Sent(2, clk.Now()) // lost, and so are its resends
	clk.Advance(10 * time.Second)
	fmt.Println("retransmits:", tr.Stats().Retransmits)
	// Output:
	// 40ms: rtt 40ms
	// 240ms: resend 2 (attempt 1)
	// 640ms: resend 2 (attempt 2)
	// 1.44s: close: retransmit: give up on seq 2 after 2 retransmissions, 1.4s unacknowledged: retransmit: too many retransmissions (max retransmits: true)
	// retransmits: 2
}
