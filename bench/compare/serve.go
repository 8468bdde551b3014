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

	"github.com/netwheel/netwheel/bench/internal/baseline"
)

// serveCmd runs one baseline server on its own, so that a client in
// another process (loadtest -addr, or the table) can drive it. It prints
// "listening HOST:PORT" on stdout once it accepts, and serves until ctx
// ends (SIGINT, SIGTERM) or -for has passed.
func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("server", baseline.KindGnet, "the server: gnet (no timers), gnetafterfunc (time.AfterFunc per conn), netdeadline (goroutine per conn, SetReadDeadline), nbio (its SetReadDeadline per packet)")
	addr := fs.String("listen", "127.0.0.1:0", "listen `address`")
	idle := fs.Duration("idle", 0, "close connections silent this long (0: never; gnet never does)")
	life := fs.Duration("for", 10*time.Minute, "serve at most this long")
	metricsAddr := fs.String("metrics", "", "serve the server's close-delay histogram (which it then measures) on http://`ADDR`/metrics (loopback), for loadtest -metrics ADDR")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: compare serve [-server KIND] [-listen ADDR] [-idle D] [-for D] [-metrics ADDR]\n\n"+
			"Serves one baseline server, raw echo, for loadtest -addr.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case *life <= 0 || *life > 24*time.Hour:
		return fmt.Errorf("%w: -for %s: want more than 0 and at most 24h", errUsage, *life)
	case *idle < 0:
		return fmt.Errorf("%w: -idle %s is negative", errUsage, *idle)
	case !isLoopback(*addr):
		return fmt.Errorf("%w: -listen %q: compare serves on loopback only", errUsage, *addr)
	case *metricsAddr != "" && !isLoopback(*metricsAddr):
		return fmt.Errorf("%w: -metrics %q: compare serves on loopback only", errUsage, *metricsAddr)
	}
	srv, err := baseline.Start(*kind, *addr, baseline.Options{Idle: *idle, CloseDelay: *metricsAddr != ""})
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
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

// isLoopback reports whether addr (HOST:PORT) is on localhost or a
// loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// serveMetrics serves srv's metrics at http://addr/metrics until the
// returned function is called, which waits for the HTTP server to stop.
func serveMetrics(addr string, srv baseline.Server) (func(), error) {
	ms, ok := srv.(interface{ MetricsHandler() http.Handler })
	if !ok || ms.MetricsHandler() == nil {
		return nil, fmt.Errorf("%w: -metrics: this server has no metrics to serve (a baseline measures its close delay only with -idle)", errUsage)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("compare: -metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", ms.MetricsHandler())
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

// startServe starts `compare serve` for kind in a child process, with the
// given idle timeout, serving at most life, and returns once it listens.
func startServe(ctx context.Context, kind string, idle, life time.Duration, serveArgs ...string) (*serverProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	args := append([]string{"serve", "-server", kind, "-idle", idle.String(), "-for", life.String()}, serveArgs...)
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
		return nil, fmt.Errorf("compare: starting the server process: %w", err)
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
		return nil, fmt.Errorf("compare: %w (%v)%s", errExitedEarly, p.waitErr, w.lastWords())
	case <-time.After(startBound):
		_ = p.stop()
		return nil, fmt.Errorf("compare: the server process did not say where it listens within %s%s", startBound, w.lastWords())
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
