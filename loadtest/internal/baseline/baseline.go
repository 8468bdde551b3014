// Package baseline holds the comparison servers of the load-test harness:
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
package baseline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// Server is a running baseline server. Every method may be called from any
// goroutine.
type Server interface {
	// Addr is the listening address.
	Addr() net.Addr
	// Stats is a snapshot of the server's counters.
	Stats() report.Server
	// Shutdown closes the listener and every connection and waits for the
	// server's goroutines, or for ctx.
	Shutdown(ctx context.Context) error
}

// Kinds of baseline server, as the harness's -server flag names them.
const (
	KindGnet          = "gnet"
	KindGnetAfterFunc = "gnetafterfunc"
	KindNetDeadline   = "netdeadline"
)

// ErrKind is returned by Start for an unknown kind.
var ErrKind = errors.New("baseline: unknown server kind")

// Start starts a baseline server of the given kind on addr (such as
// 127.0.0.1:0), closing connections idle for idle (0: never; the plain gnet
// server ignores it). It returns once the server is listening.
func Start(kind, addr string, idle time.Duration) (Server, error) {
	switch kind {
	case KindGnet:
		return startGnet(addr, 0, kind)
	case KindGnetAfterFunc:
		return startGnet(addr, idle, kind)
	case KindNetDeadline:
		return startNet(addr, idle)
	}
	return nil, fmt.Errorf("%w %q", ErrKind, kind)
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

func (c *counters) stats(kind string) report.Server {
	return report.Server{Kind: kind, Open: c.open.Load(), Accepted: c.accepted.Load(), PeakOpen: c.peak.Load(),
		Closes: map[string]int64{"idle": c.idleCloses.Load(), "peer": c.peerCloses.Load()}, Expiries: c.idleCloses.Load()}
}

// gnetServer is the gnet baselines. Ownership: eng and addr are written in
// OnBoot before booted is closed, read-only after; counters are atomic.
type gnetServer struct {
	gnet.BuiltinEventEngine
	kind   string
	idle   time.Duration
	eng    gnet.Engine
	addr   net.Addr
	booted chan struct{}
	done   chan error
	counters
}

// connState is a gnetafterfunc connection's timer, in gnet's Context.
type connState struct {
	timer *time.Timer
	fired atomic.Bool
}

type quiet struct{}

func (quiet) Debugf(string, ...any) {}
func (quiet) Infof(string, ...any)  {}
func (quiet) Warnf(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(string, ...any) {}

func startGnet(addr string, idle time.Duration, kind string) (Server, error) {
	s := &gnetServer{kind: kind, idle: idle, booted: make(chan struct{}), done: make(chan error, 1)}
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
	}
	s.closed(idle)
	return gnet.None
}

func (s *gnetServer) Addr() net.Addr       { return s.addr }
func (s *gnetServer) Stats() report.Server { return s.stats(s.kind) }

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
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	counters
}

func startNet(addr string, idle time.Duration) (Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	s := &netServer{ln: ln, idle: idle, conns: map[net.Conn]struct{}{}}
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
	for {
		if s.idle > 0 {
			_ = c.SetReadDeadline(time.Now().Add(s.idle))
		}
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			idle = errors.Is(err, os.ErrDeadlineExceeded)
			return
		}
	}
}

func (s *netServer) Addr() net.Addr       { return s.ln.Addr() }
func (s *netServer) Stats() report.Server { return s.stats(KindNetDeadline) }

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
