package frame_test

import (
	"context"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// A client dials a framed echo server, sends a message, reads the echo
// and says goodbye. The Conn acknowledges the echo and answers the
// server's keepalive PINGs on its own.
func Example() {
	srv, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed}, netserver.Echo{})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := frame.Dial(ctx, srv.Addr().String())
	if err != nil {
		panic(err)
	}
	c.NetConn().SetDeadline(time.Now().Add(5 * time.Second)) // a bound on every read and write below

	seq, err := c.Send([]byte("hello"))
	if err != nil {
		panic(err)
	}
	echo, err := c.Recv()
	if err != nil {
		panic(err)
	}
	fmt.Printf("sent DATA %d, the server echoed %q\n", seq, echo)
	if err := c.Close(frame.CodeNormal, "done"); err != nil {
		panic(err)
	}
	// Output:
	// sent DATA 1, the server echoed "hello"
}
