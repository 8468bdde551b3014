// Command echo is netwheel's echo server: a production-shaped binary over
// package netserver. It sends back every byte (-proto raw) or DATA frame
// (-proto framed) it receives, enforces the per-connection timeouts set by
// its flags, serves Prometheus metrics on -metrics (and pprof there with
// -pprof), and shuts down gracefully on SIGINT or SIGTERM.
//
// Its defaults are the library's, netserver.DefaultConfig, safe for
// production: with no flags no peer can hold a connection open forever,
// being silent, trickling bytes or a frame, or not reading (the handshake,
// idle, write-stall and, framed, frame and keepalive timeouts, a max age of
// about an hour, and netserver's output limits are on), -max-conns is
// bounded by the open-file limit, and the metrics server keeps few
// connections, none idle for long. Flags follow netserver's one rule: 0 is
// the default (echo -h shows it), off (or -1) turns a protection off, and
// any other negative value is an error. echo only maps flags onto a
// netserver.Config: netserver checks it (a deadline shorter than the tick,
// -max-conns above the open-file limit, -event-loops beyond 4 per core are
// refused) and echo prints its words.
//
//	go run ./cmd/echo -addr 127.0.0.1:9000 -idle-timeout 1m -metrics 127.0.0.1:9100 -pprof
//	go run ./cmd/echo -proto framed -keepalive-time 15s -keepalive-timeout 5s
//	go run ./cmd/echo -h
//
// With GOMAXPROCS unset, and no cgroup CPU quota that made the runtime pick
// fewer Ps than cores, echo runs with GOMAXPROCS one above the cores, so
// that its default event loops (GOMAXPROCS-1) are one per core and the
// timer wheel's goroutine keeps a P to spare (see procsFor).
//
// On SIGINT or SIGTERM echo drains: framed peers are told GOAWAY and
// closed with CLOSE code 2 as they finish (docs/protocol.md), raw ones as
// they go idle, for at most -shutdown-timeout; the connections left then
// are cut, each told CLOSE code 2 (framed), counted and logged, and echo
// waits (up to a second) until they are closed before it exits.
// -shutdown-timeout 0 is the default, 10 s; off cuts the connections at
// once.
//
// Exit status: 0 after a clean shutdown, nothing left to cut at
// -shutdown-timeout; 1 on a runtime error or when the shutdown had to cut
// connections at its deadline; 2 on a usage error: a bad flag, or a
// configuration netserver refuses.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	raiseProcs(os.Getenv("GOMAXPROCS"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // from now on a second signal kills the process at once
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
