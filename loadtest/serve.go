package main

import (
	"bytes"
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
	"sync"
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
	kind := fs.String("server", kindNetwheel, "embedded server: netwheel, netwheel-notimers, gnet, netdeadline, gnetafterfunc, nbio")
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

// startServe starts `loadtest serve` for kind in a child process, serving
// at most life, and returns once it listens.
func startServe(ctx context.Context, kind string, runArgs []string, life time.Duration, serveArgs ...string) (*serverProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	args := append(append([]string{"serve", "-server", kind, "-for", life.String()}, serveArgs...), "--")
	args = append(args, runArgs...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	setParentDeathSignal(cmd)
	w := newLineWatch(func(line string) (string, bool) { return strings.CutPrefix(strings.TrimSpace(line), "listening ") })
	cmd.Stdout = w
	return startProc(cmd, w)
}

// serverProc is a server running in a child process. Its methods are for
// the goroutine that started it.
type serverProc struct {
	addr   string // where it listens
	pid    int
	cmd    *exec.Cmd
	out    *lineWatch    // the output the address was found in
	exited chan struct{} // closed once the process has exited; then waitErr is set
	// waitErr is cmd.Wait's result: written by the waiting goroutine
	// before it closes exited.
	waitErr error
}

// errExitedEarly: a server process exited before it said where it
// listens (a bad flag, or an address it could not take).
var errExitedEarly = errors.New("the server process exited before it listened")

// Bounds of a server process's start (until it says where it listens) and
// of its shutdown after SIGTERM (cmd/echo grants busy connections 10 s by
// default), after which it is killed.
const (
	startBound = 30 * time.Second
	stopGrace  = 15 * time.Second
)

// startProc starts cmd, whose output goes through w, and waits until w has
// seen the listening address, or the process exited, or startBound passed.
func startProc(cmd *exec.Cmd, w *lineWatch) (*serverProc, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadtest: starting the server process: %w", err)
	}
	p := &serverProc{pid: cmd.Process.Pid, cmd: cmd, out: w, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	select {
	case <-w.found:
		p.addr = w.value()
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("loadtest: %w (%v)%s", errExitedEarly, p.waitErr, w.lastWords())
	case <-time.After(startBound):
		_ = p.stop()
		return nil, fmt.Errorf("loadtest: the server process did not say where it listens within %s%s", startBound, w.lastWords())
	}
}

// stop sends the process SIGTERM and waits for it to exit, killing it after
// stopGrace. An exit status other than 0 is an error.
func (p *serverProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if p.waitErr != nil {
		return fmt.Errorf("%w%s", p.waitErr, p.out.lastWords())
	}
	return nil
}

// tailLines is how many of a server process's last output lines an error
// quotes.
const tailLines = 10

// lineWatch is an io.Writer for a child process's output: it looks for the
// line that says where the process listens, and keeps the last lines for
// errors. exec's copying goroutine writes; the starter reads: mu guards
// every field but found, which is closed once val is set.
type lineWatch struct {
	match   func(line string) (string, bool)
	found   chan struct{}
	mu      sync.Mutex
	val     string
	partial []byte
	last    []string // at most tailLines
}

// newLineWatch returns a watch whose match returns the address a line
// holds, if it is the one.
func newLineWatch(match func(line string) (string, bool)) *lineWatch {
	return &lineWatch{match: match, found: make(chan struct{})}
}

func (w *lineWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if len(w.last) == tailLines {
			w.last = w.last[1:]
		}
		w.last = append(w.last, line)
		if w.val == "" {
			if v, ok := w.match(line); ok && v != "" {
				w.val = v
				close(w.found)
			}
		}
	}
	if len(w.partial) > 64<<10 { // no newline in sight: not a log line
		w.partial = w.partial[:0]
	}
	return len(b), nil
}

// value returns the address found.
func (w *lineWatch) value() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.val
}

// lastWords returns the last lines written, as the tail of an error
// message ("" if none were kept).
func (w *lineWatch) lastWords() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return ""
	}
	return "; its last lines:\n\t" + strings.Join(w.last, "\n\t")
}
