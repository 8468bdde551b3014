package idleconn_test

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/idle/idleconn"
	"github.com/netwheel/netwheel/wheel"
)

// Reaping an idle net.Conn: after the timeout, Read fails with an error
// that says why. A real server wraps its listener with WrapListener.
func ExampleWrapConn() {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	client, server := net.Pipe()
	defer client.Close()
	c, err := idleconn.WrapConn(server, w, idle.Config{IdleTimeout: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	clk.Advance(30 * time.Second)
	_, err = c.Read(make([]byte, 1))
	fmt.Println(errors.Is(err, idle.ReasonIdle), c.Tracker().Reason())
	// Output:
	// true idle
}
