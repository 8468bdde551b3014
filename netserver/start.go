package netserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/wheel"
)

// Start starts listening and serving, and returns once the listener is up
// (or failed). It may be called once; after Shutdown it returns
// ErrServerClosed. A Server whose Start failed is stopped (Done is closed).
func (s *Server) Start() error {
	if !s.started.CompareAndSwap(false, true) {
		if s.shutdownCalled.Load() {
			return ErrServerClosed
		}
		return errors.New("netserver: Start called twice")
	}
	loops := s.size()
	if err := s.startSources(); err != nil { // New validated the settings: cannot happen
		s.runErr = err
		close(s.done)
		close(s.startDone)
		return err
	}
	// With SO_REUSEPORT, other listeners of this process may share the
	// address, and Shutdown must close only this server's: those there
	// before Start are not, and Starts take turns so no other server's
	// appear while this one looks.
	claimMu.Lock()
	defer claimMu.Unlock()
	addr, reusePort, err := s.listenAddr()
	if err != nil {
		s.runErr = err
		close(s.done)
		close(s.startDone)
		return err
	}
	foreign := listenersOn(addr)
	s.wheel = wheel.New(wheel.WithTick(s.tick()), wheel.WithBatchEnd(s.handOff))
	s.wheelPub.Store(s.wheel)
	s.loopCount.Store(int32(loops))
	go s.run(addr, s.gnetOptions(loops, reusePort))
	defer close(s.startDone)
	select {
	case <-s.booted:
		want := 1
		if reusePort && s.addr.(*net.TCPAddr).Port == listenPort(addr) {
			want = loops // gnet opens one per loop, after OnBoot
		}
		s.listeners = s.ownListeners(foreign, want)
		s.log.Info("netserver: listening", "addr", s.addr.String(), "protocol", s.cfg.Protocol.String(),
			"event_loops", loops, "gomaxprocs", runtime.GOMAXPROCS(0), "tick", s.tick().String(), "max_conns", maxConnsAttr(s.maxConns),
			"max_conns_per_source", maxConnsAttr(int64(s.perSource())), "proxy_protocol", s.cfg.ProxyProtocol.String())
		return nil
	case <-s.done:
		return fmt.Errorf("netserver: listen on %s: %w", addr, s.runErr)
	}
}

// maxConnsAttr is a bound on open connections as logged: "none" for none
// (0: MaxConns Off, or an open-file limit unknown; MaxConnsPerSource Off).
func maxConnsAttr(n int64) any {
	if n == 0 {
		return "none"
	}
	return n
}

// tick returns the wheel's tick, resolved by New.
func (s *Server) tick() time.Duration { return s.cfg.Tick }

// size returns the number of event loops to run, resolves the bound on
// open connections (s.maxConns) for it, and warns if the loops leave the
// wheel no P.
func (s *Server) size() (loops int) {
	procs := runtime.GOMAXPROCS(0)
	loops = s.cfg.EventLoops
	if loops == 0 {
		loops = max(1, procs-1)
	}
	switch {
	case s.cfg.MaxConns > 0:
		s.maxConns = int64(s.cfg.MaxConns)
	case s.cfg.MaxConns == 0:
		s.maxConns = int64(fdlimit.MaxConns(fdlimit.OpenFiles(), loops))
	}
	if procs <= loops {
		s.log.Warn("netserver: no P to spare for the timer wheel: with every P held by an event loop waiting in epoll_wait, "+
			"timers fire milliseconds late; run fewer event loops than GOMAXPROCS", "event_loops", loops, "gomaxprocs", procs)
	}
	return loops
}

// listenAddr returns the address to listen on and whether with
// SO_REUSEPORT. Where each loop has a listener of its own
// (perLoopListeners), it always is, and a port that others may share is
// checked free first (checkAddr).
func (s *Server) listenAddr() (addr string, reusePort bool, err error) {
	addr, reusePort = s.cfg.Addr, s.cfg.ReusePort
	if !perLoopListeners {
		return addr, reusePort, nil
	}
	if !s.cfg.ReusePort || listenPort(addr) == 0 {
		if addr, err = checkAddr(addr); err != nil {
			return "", false, err
		}
	}
	return addr, true, nil
}

// listenersOn returns the listening sockets of the process on addr now.
func listenersOn(addr string) map[listenerID]bool {
	found := map[listenerID]bool{}
	if a, err := net.ResolveTCPAddr("tcp", addr); err == nil && a.Port != 0 {
		ids, _ := findListeners(a)
		for _, id := range ids {
			found[id] = true
		}
	}
	return found
}

// gnetOptions returns gnet's options for loops event loops.
func (s *Server) gnetOptions(loops int, reusePort bool) []gnet.Option {
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(loops),
		gnet.WithReusePort(reusePort),
		gnet.WithReuseAddr(true),
		gnet.WithTicker(false),
		gnet.WithLogger(gnetLogger{s.log, s}),
	}
	if k := s.cfg.Kernel; k.KeepaliveIdle > 0 {
		opts = append(opts, gnet.WithTCPKeepAlive(k.KeepaliveIdle))
		if k.KeepaliveInterval > 0 {
			opts = append(opts, gnet.WithTCPKeepInterval(k.KeepaliveInterval))
		}
		if k.KeepaliveCount > 0 {
			opts = append(opts, gnet.WithTCPKeepCount(k.KeepaliveCount))
		}
	}
	return opts
}

// run runs gnet's engine on addr until it stops, then the wheel; it closes
// s.done when both have.
func (s *Server) run(addr string, opts []gnet.Option) {
	defer close(s.done)
	s.runErr = gnet.Run(&gnetHandler{s: s}, "tcp://"+addr, opts...)
	// Every loop has returned: no connection is left to arm a timer.
	s.wheel.Stop()
}

// claimMu serializes the part of Start that finds the server's listening
// sockets among the process's.
var claimMu sync.Mutex

// ownListeners returns the listening sockets on the server's address that
// are not foreign, waiting (at most a second) until there are want of them.
func (s *Server) ownListeners(foreign map[listenerID]bool, want int) []listenerID {
	var own []listenerID
	for deadline := time.Now().Add(time.Second); ; {
		own = own[:0]
		ids, err := findListeners(s.addr)
		if err != nil {
			return nil
		}
		for _, id := range ids {
			if !foreign[id] {
				own = append(own, id)
			}
		}
		if len(own) >= want || time.Now().After(deadline) {
			return own
		}
		time.Sleep(time.Millisecond)
	}
}

// listenPort returns the port of a host:port address, or -1.
func listenPort(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	return n
}

// boundAddr asks the kernel which address the listener got (the port may
// have been 0).
func boundAddr(eng gnet.Engine, cfgAddr string) net.Addr {
	fallback := func() net.Addr {
		a, _ := net.ResolveTCPAddr("tcp", cfgAddr)
		return a
	}
	fd, err := eng.Dup()
	if err != nil {
		return fallback()
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fallback()
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port, Zone: strconv.Itoa(int(a.ZoneId))}
	}
	return fallback()
}

// gnetLogger sends gnet's own logs to slog at debug level (errors at error),
// and keeps the last error for Err.
type gnetLogger struct {
	l *slog.Logger
	s *Server
}

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug("gnet: " + fmt.Sprintf(f, a...)) }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug("gnet: " + fmt.Sprintf(f, a...)) }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn("gnet: " + fmt.Sprintf(f, a...)) }
func (g gnetLogger) Errorf(f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	g.s.gnetErr.Store(&msg)
	g.l.Error("gnet: " + msg)
}
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error("gnet: fatal: " + fmt.Sprintf(f, a...)) }
