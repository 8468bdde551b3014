// Command compare measures netwheel against other servers: cmd/echo, as
// its users get it, against bare gnet, gnet with time.AfterFunc, a
// goroutine per connection with SetReadDeadline, and nbio, each in a
// process of its own, driven by the loadtest harness as a user runs it
// (a separate process, its -json result read back). It prints the table
// of docs/perf.md, "The server against its baselines".
//
//	cd bench
//	go run ./compare -rounds 3                       the table (about eight minutes)
//	go run ./compare -phases reap -rounds 6          one phase over more rounds
//	go run ./compare serve -server netdeadline -listen 127.0.0.1:9555 -idle 20s
//	                                                 one baseline alone, for a client elsewhere
//
// See -h for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(2)
	}
}

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "serve" {
		return serveCmd(ctx, args[1:], stdout, stderr)
	}
	return compareCmd(ctx, args, stdout, stderr)
}

// errUsage is wrapped by every flag validation error.
var errUsage = errors.New("compare: bad flags")

// kindNetwheel is compare's name for netwheel: the cmd/echo binary.
const kindNetwheel = "netwheel"
