package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/baseline"
)

// serveCmd runs one embedded server on its own, with no client, so that a
// client in another process (loadtest -addr, or compare -separate) can
// drive it: the server then has its own process, scheduler and open-file
// limit. It prints "listening HOST:PORT" on stdout once it accepts, and
// serves until ctx ends (SIGINT, SIGTERM) or -for has passed.
func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadtest serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("server", kindNetwheel, "embedded server: netwheel, netwheel-notimers, gnet, netdeadline, gnetafterfunc")
	addr := fs.String("listen", "127.0.0.1:0", "listen `address`")
	life := fs.Duration("for", 10*time.Minute, "serve at most this long")
	metricsAddr := fs.String("metrics", "", "serve the server's Prometheus metrics on http://`ADDR`/metrics (loopback): netwheel's, or a baseline's\n"+
		"close-delay histogram (which the baselines then measure), for loadtest -metrics ADDR")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadtest serve [-server KIND] [-listen ADDR] [-for D] [-metrics ADDR] -- [run flags: -proto and the timeout flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *life <= 0 || *life > 24*time.Hour {
		return fmt.Errorf("%w: -for %s: want more than 0 and at most 24h", errUsage, *life)
	}
	if !isLoopback(*addr) {
		return fmt.Errorf("%w: -listen %q: the harness serves on loopback only", errUsage, *addr)
	}
	o, err := compareOptions(*kind, fs.Args(), stderr)
	if err != nil {
		return err
	}
	if *metricsAddr != "" && !isLoopback(*metricsAddr) {
		return fmt.Errorf("%w: -metrics %q: the harness serves on loopback only", errUsage, *metricsAddr)
	}
	o.listen = *addr
	o.closeDelay = *metricsAddr != ""
	stopProf, err := startCPUProfile(o.cpuProf)
	if err != nil {
		return err
	}
	defer stopProf()
	srv, err := startServer(o)
	if err != nil {
		return err
	}
	shutdown := func() error {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		return srv.Shutdown(sctx)
	}
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, srv)
		if err != nil {
			return errors.Join(err, shutdown())
		}
		defer stopMetrics()
	}
	fmt.Fprintf(stdout, "listening %s\n", srv.Addr())
	tctx, cancel := context.WithTimeout(ctx, *life)
	<-tctx.Done()
	cancel()
	return shutdown()
}

// serveMetrics serves srv's metrics at http://addr/metrics until the
// returned function is called, which waits for the HTTP server to stop.
func serveMetrics(addr string, srv baseline.Server) (func(), error) {
	h := metricsHandler(srv)
	if h == nil {
		return nil, fmt.Errorf("%w: -metrics: this server has no metrics to serve (a baseline measures its close delay only with an idle timeout: -idle D after --)", errUsage)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("loadtest: -metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln) // returns when closed
	}()
	return func() {
		_ = hs.Close()
		<-done
	}, nil
}

// startServe starts `loadtest serve` for kind in a child process and
// returns its address and a function that stops it (SIGTERM, then waits).
func startServe(ctx context.Context, kind string, runArgs []string, life time.Duration) (string, func() error, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("loadtest: %w", err)
	}
	args := append([]string{"serve", "-server", kind, "-for", life.String(), "--"}, runArgs...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, fmt.Errorf("loadtest: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("loadtest: starting the server process: %w", err)
	}
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	a, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("loadtest: the server process did not start (%q, %v)", line, err)
	}
	return a, stop, nil
}
