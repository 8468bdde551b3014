package netserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver"
)

// shout is a whole protocol: it answers every chunk in upper case. The
// server gives it idle reaping for free.
type shout struct{}

func (shout) OnOpen(*netserver.Conn) {}
func (shout) OnMessage(c *netserver.Conn, msg []byte) {
	_ = c.Send(bytes.ToUpper(msg))
}
func (shout) OnClose(c *netserver.Conn, r netserver.Reason) { fmt.Println("server closed it:", r) }

func Example() {
	srv, err := netserver.New(netserver.Config{
		Addr:     "127.0.0.1:0",
		Timeouts: idle.Config{IdleTimeout: 200 * time.Millisecond},
	}, shout{})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())

	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	buf := make([]byte, 5)
	io.ReadFull(c, buf)
	fmt.Println(string(buf))
	_, err = c.Read(buf) // then silence: the server reaps the connection
	fmt.Println("client read:", err)
	// Output:
	// HELLO
	// server closed it: idle
	// client read: EOF
}
