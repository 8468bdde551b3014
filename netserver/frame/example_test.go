package frame_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// A client keeps sending until the server says it is going away (here a
// scripted server that drains after the second message), then takes the
// echoes of what it had sent and ends at the server's final CLOSE.
func ExampleConn_GoingAway() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go drainingServer(ln)

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	c := frame.NewConn(nc, 0)
	defer c.Close(frame.CodeNormal, "")
	nc.SetDeadline(time.Now().Add(5 * time.Second))

	sent := 0
	for _, msg := range []string{"one", "two", "three"} {
		if _, err := c.Send([]byte(msg)); errors.Is(err, frame.ErrGoingAway) {
			break // start nothing new
		} else if err != nil {
			panic(err)
		}
		sent++
		echo, err := c.Recv()
		if err != nil {
			panic(err)
		}
		fmt.Printf("echo %q\n", echo)
	}
	away, _ := c.GoingAway()
	fmt.Printf("sent %d; the server is going away (%s, %v grace)\n", sent, away.Code, away.Grace)
	for {
		_, err := c.Recv() // nothing was left in flight: the final CLOSE
		var ce *frame.CloseError
		if errors.As(err, &ce) {
			fmt.Printf("closed: %s %q\n", ce.Code, ce.Reason)
			return
		}
		if err != nil {
			panic(err)
		}
	}
	// Output:
	// echo "one"
	// echo "two"
	// sent 2; the server is going away (shutdown, 5s grace)
	// closed: shutdown "drained"
}

// drainingServer echoes the DATA of the connection it accepts on ln and
// sends GOAWAY just before the second echo; once the client's GOAWAY has come and
// its echoes are acknowledged, it sends the final CLOSE.
func drainingServer(ln net.Listener) {
	nc, err := ln.Accept()
	if err != nil {
		return
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	d := frame.NewDecoder(0)
	buf := make([]byte, 4096)
	var echoed, acked uint64
	answered := false
	for !answered || acked < echoed {
		n, err := nc.Read(buf)
		if err != nil {
			return
		}
		d.Feed(buf[:n])
		for {
			f, ok, err := d.Next()
			if err != nil || !ok {
				break
			}
			switch f.Type {
			case frame.TypeData:
				var out []byte
				if echoed == 1 { // the GOAWAY goes before the second echo
					out = frame.AppendGoAway(out, frame.CodeShutdown, echoed, 5*time.Second, "shutting down")
				}
				echoed++
				nc.Write(frame.AppendData(out, echoed, f.Payload))
			case frame.TypeAck:
				acked = f.Seq
			case frame.TypeGoAway:
				answered = true
			}
		}
	}
	nc.Write(frame.AppendClose(nil, frame.CodeShutdown, "drained"))
}
