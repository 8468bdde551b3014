package netserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/netwheel/netwheel/netserver"
)

// The README's "Embed the server with your own protocol" snippets, word for
// word (internal/readme checks them): lineProtocol and Example_readme's
// body. example_lines_test.go has the protocol with its tests.

// lineProtocol answers each line with "OK <line>"; QUIT closes with a code of its own.
type lineProtocol struct{}

func (lineProtocol) OnOpen(*netserver.Conn)                    {}
func (lineProtocol) OnClose(*netserver.Conn, netserver.Reason) {}
func (lineProtocol) OnProbe(c *netserver.Conn)                 { c.Send([]byte("PING\n")) } // keepalive

// OnStream consumes every whole line and leaves a partial one buffered.
func (lineProtocol) OnStream(c *netserver.Conn, in []byte) (consumed int) {
	for {
		i := bytes.IndexByte(in[consumed:], '\n')
		if i < 0 {
			if consumed < len(in) {
				c.RequestStart() // half a request is here: its deadline runs
			}
			return consumed
		}
		line := string(in[consumed : consumed+i])
		consumed += i + 1
		c.RequestEnd()
		c.HandshakeDone()
		if line == "QUIT" {
			c.CloseCode(4000, "bye")
			return consumed
		}
		if line != "PONG" { // a probe's answer is a sign of life, not activity
			c.Activity()
			c.Send([]byte("OK " + line + "\n"))
		}
	}
}

func Example_readme() {
	// The safe defaults: the first line within 10s, a request at least every
	// 5m, output drained within 30s, reconnect after about 1h.
	cfg := netserver.DefaultConfig(netserver.Raw)
	cfg.Addr = "127.0.0.1:0"
	cfg.HandlerMarks = true                       // the handler marks activity, requests and the handshake
	cfg.Timeouts.FrameTimeout = 5 * time.Second   // each request whole within 5s
	cfg.Timeouts.KeepaliveTime = 30 * time.Second // PING after 30s of silence, then any byte within 10s
	srv, err := netserver.New(cfg, lineProtocol{})
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
	c.Write([]byte("hello\nwor")) // a request and a half,
	c.Write([]byte("ld\nQUIT\n")) // then the rest
	out, _ := io.ReadAll(c)       // until the server closes
	fmt.Print(string(out))
	// Output:
	// OK hello
	// OK world
}
