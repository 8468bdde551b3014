// Command echo is netwheel's echo server: a production-shaped binary over
// package netserver. It sends back every byte (-proto raw) or DATA frame
// (-proto framed) it receives, enforces the per-connection timeouts set by
// its flags, serves Prometheus metrics on -metrics (and pprof there with
// -pprof), and shuts down gracefully on SIGINT or SIGTERM.
//
// Its defaults are the library's, netserver.DefaultConfig, safe for
// production: with no flags no peer can hold a connection open forever.
// Flags follow netserver's one rule, and netserver checks the Config they
// make; echo prints its words (echo -h says the rule and the exit statuses).
//
//	go run ./cmd/echo -addr 127.0.0.1:9000 -idle-timeout 1m -metrics 127.0.0.1:9100 -pprof
//	go run ./cmd/echo -proto framed -keepalive-time 15s -keepalive-timeout 5s
//	go run ./cmd/echo -h
//
// With GOMAXPROCS unset, echo runs with GOMAXPROCS one above the cores,
// so that its default event loops are one per core and the timer wheel's
// goroutine keeps a P to spare (see procsFor).
//
// On SIGINT or SIGTERM echo drains: framed peers are told GOAWAY and
// closed with CLOSE code 2 as they finish (docs/protocol.md), raw ones as
// they go idle, for at most -shutdown-timeout; the connections left then
// are cut, each told CLOSE code 2 (framed), counted and logged, and echo
// waits (up to a second) until they are closed before it exits 1.
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
