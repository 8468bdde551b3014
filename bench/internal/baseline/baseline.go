// Package baseline holds the servers netwheel is compared with (bench's
// compare and serve):
// raw-protocol echo servers with the timer strategies netwheel is measured
// against. Each echoes every byte and, given an idle timeout, closes
// connections that stay silent that long.
//
//   - Gnet: a plain gnet v2 echo server with no timers at all (the
//     throughput ceiling; it never reaps anything).
//   - GnetAfterFunc: gnet with one time.AfterFunc per connection, reset on
//     every packet.
//   - NetDeadline: a goroutine per connection on package net, calling
//     SetReadDeadline before every Read.
//   - Nbio: an nbio engine calling nbio's SetReadDeadline on every packet
//     (nbio.go).
package baseline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is a running baseline server. Every method may be called from any
// goroutine.
type Server interface {
	// Addr is the listening address.
	Addr() net.Addr
	// Stats is a snapshot of the server's counters.
	Stats() Stats
	// Shutdown closes the listener and every connection and waits for the
	// server's goroutines, or for ctx.
	Shutdown(ctx context.Context) error
}

// Stats is a snapshot of a server's counters.
type Stats struct {
	Open, Accepted, PeakOpen int64
	// Closes counts the connections closed, by who closed them: "idle"
	// (the server's idle timeout) or "peer".
	Closes map[string]int64
}

// CloseDelayMetric is the name of the close-delay histogram
// (Options.CloseDelay): netserver's, which the harness reads from either.
const CloseDelayMetric = "netwheel_timeout_close_delay_seconds"

// Kinds of baseline server, as compare's -servers flag names them.
const (
	KindGnet          = "gnet"
	KindGnetAfterFunc = "gnetafterfunc"
	KindNetDeadline   = "netdeadline"
)

// ErrKind is returned by Start for an unknown kind.
var ErrKind = errors.New("baseline: unknown server kind")

// Options tune a baseline server.
type Options struct {
	// Idle closes connections silent this long (0: never; the plain gnet
	// server ignores it).
	Idle time.Duration
	// CloseDelay measures, for each idle close, how long after its exact
	// deadline (the last packet plus Idle) the server acts on it, in the
	// histogram that netserver exports as CloseDelayMetric, with the
	// same buckets, served by the server's MetricsHandler. The
	// gnetafterfunc server then reads the clock once more per packet, for
	// the deadline's start; the netdeadline server computes its deadline
	// anyway. Off for throughput runs.
	CloseDelay bool
}

// CloseDelayBuckets are the buckets of the close-delay histogram: those of
// netserver's (a test checks that they agree).
var CloseDelayBuckets = []float64{
	0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008,
	0.010, 0.0125, 0.015, 0.020, 0.025, 0.030, 0.040, 0.050, 0.075, 0.100, 0.150, 0.200, 0.300, 0.500, 1,
}

// Start starts a baseline server of the given kind on addr (such as
// 127.0.0.1:0). It returns once the server is listening.
func Start(kind, addr string, o Options) (Server, error) {
	switch kind {
	case KindGnet:
		return startGnet(addr, Options{}, kind)
	case KindGnetAfterFunc:
		return startGnet(addr, o, kind)
	case KindNetDeadline:
		return startNet(addr, o)
	case KindNbio:
		return startNbio(addr, o)
	}
	return nil, fmt.Errorf("%w %q", ErrKind, kind)
}

// closeDelay is the histogram of Options.CloseDelay; its methods do
// nothing on a nil receiver (not measuring).
type closeDelay struct {
	h       prometheus.Histogram
	handler http.Handler
}

// newCloseDelay returns the histogram o asks for: nil unless the server
// closes idle connections and o.CloseDelay is set.
func newCloseDelay(o Options) *closeDelay {
	if o.Idle <= 0 || !o.CloseDelay {
		return nil
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    CloseDelayMetric,
		Help:    "How long after its exact deadline (last packet plus the idle timeout) the server acted on an idle close.",
		Buckets: CloseDelayBuckets,
	})
	r := prometheus.NewRegistry()
	r.MustRegister(h)
	return &closeDelay{h: h, handler: promhttp.HandlerFor(r, promhttp.HandlerOpts{})}
}

func (d *closeDelay) observe(late time.Duration) {
	if d != nil {
		d.h.Observe(late.Seconds())
	}
}

// MetricsHandler serves the close-delay histogram. It returns nil when the
// server measures none (no idle timeout, or Options.CloseDelay unset): it
// then has no metrics to serve.
func (d *closeDelay) MetricsHandler() http.Handler {
	if d == nil {
		return nil
	}
	return d.handler
}

// counters are shared by a server's goroutines; all atomic.
type counters struct {
	open, accepted, peak, idleCloses, peerCloses atomic.Int64
}

func (c *counters) opened() {
	c.accepted.Add(1)
	n := c.open.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

func (c *counters) closed(idle bool) {
	c.open.Add(-1)
	if idle {
		c.idleCloses.Add(1)
	} else {
		c.peerCloses.Add(1)
	}
}

func (c *counters) stats() Stats {
	return Stats{Open: c.open.Load(), Accepted: c.accepted.Load(), PeakOpen: c.peak.Load(),
		Closes: map[string]int64{"idle": c.idleCloses.Load(), "peer": c.peerCloses.Load()}}
}

// gnetServer is the gnet baselines. Ownership: eng and addr are written in
// OnBoot before booted is closed, read-only after; counters are atomic.
type gnetServer struct {
	gnet.BuiltinEventEngine
	kind   string
	idle   time.Duration
	delay  *closeDelay
	eng    gnet.Engine
	addr   net.Addr
	booted chan struct{}
	done   chan error
	counters
}

// connState is a gnetafterfunc connection's timer, in gnet's Context.
// last is touched on the loop only.
type connState struct {
	timer *time.Timer
	fired atomic.Bool
	last  time.Time // when the timer was last reset (Options.CloseDelay)
}

type quiet struct{}

func (quiet) Debugf(string, ...any) {}
func (quiet) Infof(string, ...any)  {}
func (quiet) Warnf(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(string, ...any) {}

func startGnet(addr string, o Options, kind string) (Server, error) {
	s := &gnetServer{kind: kind, idle: o.Idle, delay: newCloseDelay(o), booted: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		s.done <- gnet.Run(s, "tcp://"+addr, gnet.WithMulticore(true), gnet.WithReuseAddr(true), gnet.WithLogger(quiet{}))
	}()
	select {
	case <-s.booted:
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("baseline: gnet: %w", err)
	case <-time.After(10 * time.Second):
		return nil, errors.New("baseline: gnet did not start within 10s")
	}
}

func (s *gnetServer) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	fd, err := eng.Dup()
	if err == nil {
		if sa, err := syscall.Getsockname(fd); err == nil {
			if in4, ok := sa.(*syscall.SockaddrInet4); ok {
				s.addr = &net.TCPAddr{IP: net.IP(in4.Addr[:]), Port: in4.Port}
			}
		}
		_ = syscall.Close(fd)
	}
	close(s.booted)
	return gnet.None
}

func (s *gnetServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	s.opened()
	if s.idle > 0 {
		st := &connState{}
		if s.delay != nil {
			st.last = time.Now()
		}
		st.timer = time.AfterFunc(s.idle, func() {
			st.fired.Store(true)
			_ = c.Close() // safe from another goroutine
		})
		c.SetContext(st)
	}
	return nil, gnet.None
}

func (s *gnetServer) OnTraffic(c gnet.Conn) gnet.Action {
	if st, ok := c.Context().(*connState); ok {
		if s.delay != nil {
			st.last = time.Now()
		}
		st.timer.Reset(s.idle)
	}
	buf, _ := c.Next(-1)
	_, _ = c.Write(buf)
	return gnet.None
}

func (s *gnetServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	idle := false
	if st, ok := c.Context().(*connState); ok {
		st.timer.Stop()
		idle = st.fired.Load()
		if idle && s.delay != nil {
			s.delay.observe(time.Since(st.last.Add(s.idle)))
		}
	}
	s.closed(idle)
	return gnet.None
}

func (s *gnetServer) Addr() net.Addr               { return s.addr }
func (s *gnetServer) Stats() Stats                 { return s.stats() }
func (s *gnetServer) MetricsHandler() http.Handler { return s.delay.MetricsHandler() }

func (s *gnetServer) Shutdown(ctx context.Context) error {
	if err := s.eng.Stop(ctx); err != nil {
		return err
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// netServer is the goroutine-per-connection baseline. Ownership: conns is
// guarded by mu; counters are atomic; ln is read-only after start.
type netServer struct {
	ln    net.Listener
	idle  time.Duration
	delay *closeDelay
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	counters
}

func startNet(addr string, o Options) (Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	s := &netServer{ln: ln, idle: o.Idle, delay: newCloseDelay(o), conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	return s, nil
}

func (s *netServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and friends: back off
			continue
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.opened()
		s.wg.Go(func() { s.serve(c) })
	}
}

func (s *netServer) serve(c net.Conn) {
	idle := false
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
		s.closed(idle)
	}()
	buf := make([]byte, 16<<10)
	var due time.Time
	for {
		if s.idle > 0 {
			due = time.Now().Add(s.idle)
			_ = c.SetReadDeadline(due)
		}
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if idle = errors.Is(err, os.ErrDeadlineExceeded); idle {
				s.delay.observe(time.Since(due)) // before the deferred Close
			}
			return
		}
	}
}

func (s *netServer) Addr() net.Addr               { return s.ln.Addr() }
func (s *netServer) Stats() Stats                 { return s.stats() }
func (s *netServer) MetricsHandler() http.Handler { return s.delay.MetricsHandler() }

func (s *netServer) Shutdown(ctx context.Context) error {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
