// Package netserver is an event-loop TCP server on gnet v2 in which every
// connection gets its idle, keepalive, frame-deadline, handshake, max-age,
// write-stall and retransmission timeouts from one timing wheel, touched in
// O(1) with no allocation and no lock on every packet, and expired
// connections are reaped cleanly, each with a typed Reason that is logged
// and counted.
//
// Users implement a small Handler (or use Echo) and choose the Raw byte
// stream or the Framed protocol of docs/protocol.md. Expiries are delivered
// to each connection's own event loop, batched: one hand-off per loop per
// wheel tick carries all of that loop's expired connections.
package netserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// Server is a gnet v2 TCP server with per-connection timeouts. Create it
// with New, run it with Start, stop it with Shutdown. Its methods may be
// called from any goroutine.
//
// Ownership: cfg, h, log, m, idleCfg and the limits are set by New and
// read-only after. wheel is written by Start before gnet runs, and read by
// the event loops (which gnet starts after it) and Shutdown; other
// goroutines (Stats, the metrics) read it through wheelPub. maxConns too is
// written by Start before gnet runs, and read by the event loops only. eng
// and addr are written once in OnBoot, before booted is closed. listeners is
// written by Start before it returns and read by Shutdown. loops is
// copy-on-write under loopsMu. Counters are atomic.
type Server struct {
	cfg          Config
	h            Handler
	log          *slog.Logger
	wheel        *wheel.Wheel
	wheelPub     atomic.Pointer[wheel.Wheel]
	gnetErr      atomic.Pointer[string] // gnet's last logged error, for Err
	listeners    []listenerID           // the server's own listening sockets, found by Start
	m            *metrics
	idleCfg      idle.Config
	maxFrame     int
	maxConns     int64 // the bound in force, resolved by Start before gnet runs; 0: none
	stallTimeout time.Duration
	lim          limits
	outputLook   time.Duration // how often queued output is looked at (watchOutput)

	eng       gnet.Engine
	addr      net.Addr
	booted    chan struct{}
	startDone chan struct{} // closed when Start returns, after a successful Start (or at once)
	done      chan struct{}
	runErr    error

	loopsMu sync.Mutex
	loops   atomic.Pointer[[]*loop]
	byEL    map[gnet.EventLoop]*loop // under loopsMu

	open        atomic.Int64
	accepted    atomic.Int64
	closed      [numReasons]atomic.Int64
	expiries    atomic.Int64
	probes      atomic.Int64
	retransmits atomic.Int64

	started        atomic.Bool
	shutdownCalled atomic.Bool
	loopCount      atomic.Int32 // event loops, set by Start
	draining       atomic.Bool
	drained        chan struct{} // closed when draining and no connection is open
	drainedOnce    sync.Once
	shutdownOnce   sync.Once
	shutdownErr    error
}

// loop is the server's state for one gnet event loop.
//
// Ownership: head and scheduled are shared (timer callbacks push, the loop
// pops). inbox and inboxScheduled are shared under inboxMu (any goroutine
// appends, the loop takes). Everything else belongs to the loop's
// goroutine.
type loop struct {
	s         *Server
	el        gnet.EventLoop
	head      atomic.Pointer[Conn]
	scheduled atomic.Bool
	run       gnet.RunnableFunc

	inboxMu        sync.Mutex
	inbox          []asyncTask // SendAsync and CloseAsync calls not run yet, in call order
	inboxScheduled bool        // runAsync is on gnet's task queue: appending need not schedule it
	inboxSpare     []asyncTask // the loop's: the last batch's slice, reused as the next inbox
	runAsync       gnet.RunnableFunc

	out     []byte        // output batched in the running event, for owner; see trimOut for its bound
	owner   *Conn         // the connection out holds output for
	inEvent *Conn         // the connection whose OnOpen or OnTraffic is running: it closes by returning gnet.Close
	now     time.Duration // the wheel's exact clock at the start of the running event; see clock
	conns   []*Conn       // the open connections, each at its slot; see addConn
	peeks   atomic.Int64  // framed inbound buffers looked at; written by the loop, read by tests
}

// New validates cfg and builds a Server that will run h. It starts nothing:
// call Start.
func New(cfg Config, h Handler) (*Server, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Protocol == Raw && cfg.Timeouts.KeepaliveTime != 0 {
		if _, ok := h.(Prober); !ok {
			return nil, fmt.Errorf("%w: Timeouts.KeepaliveTime with the raw protocol needs a Handler that implements Prober (netserver has no probe of its own to send); or use Kernel.KeepaliveIdle", ErrConfig)
		}
	}
	s := &Server{
		cfg:       cfg,
		h:         h,
		log:       cfg.Logger,
		booted:    make(chan struct{}),
		startDone: make(chan struct{}),
		done:      make(chan struct{}),
		drained:   make(chan struct{}),
		byEL:      map[gnet.EventLoop]*loop{},
		maxFrame:  cfg.MaxFrame,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxFrame == 0 {
		s.maxFrame = frame.DefaultMax
	}
	// The write-stall timeout is the server's own: only the event loop can
	// tell whether output is still queued.
	s.idleCfg = cfg.Timeouts
	s.stallTimeout = s.idleCfg.WriteStallTimeout
	s.idleCfg.WriteStallTimeout = 0
	s.lim = cfg.Limits.resolve()
	s.outputLook = outputLook(s.stallTimeout, s.lim.outputSoftFor)
	s.loops.Store(&[]*loop{})
	m, err := newMetrics(s, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

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
	tick := s.cfg.Tick
	if tick == 0 {
		tick = wheel.DefaultTick
	}
	procs := runtime.GOMAXPROCS(0)
	loops := s.cfg.EventLoops
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
	// With SO_REUSEPORT, other listeners of this process may share the
	// address, and Shutdown must close only this server's: those there
	// before Start are not, and Starts take turns so no other server's
	// appear while this one looks.
	claimMu.Lock()
	defer claimMu.Unlock()
	addr := s.cfg.Addr
	reusePort := s.cfg.ReusePort
	if perLoopListeners {
		reusePort = true
		if !s.cfg.ReusePort || listenPort(addr) == 0 {
			var err error
			if addr, err = checkAddr(addr); err != nil {
				s.runErr = err
				close(s.done)
				close(s.startDone)
				return err
			}
		}
	}
	foreign := map[listenerID]bool{}
	if a, err := net.ResolveTCPAddr("tcp", addr); err == nil && a.Port != 0 {
		ids, _ := findListeners(a)
		for _, id := range ids {
			foreign[id] = true
		}
	}
	s.wheel = wheel.New(wheel.WithTick(tick), wheel.WithBatchEnd(s.handOff))
	s.wheelPub.Store(s.wheel)
	s.loopCount.Store(int32(loops))
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
	go func() {
		defer close(s.done)
		s.runErr = gnet.Run(&events{s: s}, "tcp://"+addr, opts...)
		// Every loop has returned: no connection is left to arm a timer.
		s.wheel.Stop()
	}()
	defer close(s.startDone)
	select {
	case <-s.booted:
		want := 1
		if reusePort && s.addr.(*net.TCPAddr).Port == listenPort(addr) {
			want = loops // gnet opens one per loop, after OnBoot
		}
		s.listeners = s.ownListeners(foreign, want)
		s.log.Info("netserver: listening", "addr", s.addr.String(), "protocol", s.cfg.Protocol.String(),
			"event_loops", loops, "gomaxprocs", procs, "tick", tick.String(), "max_conns", s.maxConns)
		return nil
	case <-s.done:
		return fmt.Errorf("netserver: listen on %s: %w", addr, s.runErr)
	}
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

// EventLoops reports the number of event loops the server runs (Config's,
// or its default), once Start has returned; 0 before. Any goroutine.
func (s *Server) EventLoops() int { return int(s.loopCount.Load()) }

// Done is closed when the server has stopped serving, after Shutdown or if
// gnet's engine stopped by itself (then Err says why), once every event
// loop has returned and the wheel has stopped: no goroutine of the server
// is left then.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err reports why the server stopped serving, once Done is closed: nil after
// a Shutdown, gnet's error otherwise.
func (s *Server) Err() error {
	select {
	case <-s.done:
		switch {
		case s.runErr != nil:
			return fmt.Errorf("netserver: engine stopped: %w", s.runErr)
		case s.draining.Load():
			return nil
		}
		if msg := s.gnetErr.Load(); msg != nil {
			return fmt.Errorf("netserver: the engine stopped without Shutdown; gnet's last error: %s", *msg)
		}
		return errors.New("netserver: the engine stopped without Shutdown")
	default:
		return nil
	}
}

// Addr reports the address the server listens on (after Start).
func (s *Server) Addr() net.Addr { return s.addr }

// Shutdown stops the server gracefully. First it stops accepting: on Linux
// it closes the listening sockets at once, so new connections are refused
// (or, with ReusePort, go to the other sockets of the group, in other
// processes) while existing ones drain; elsewhere new ones are closed on
// arrival with ReasonShutdown. Then it closes idle connections (Framed:
// after a CLOSE frame, unless SilentShutdown), lets busy ones (a frame half
// received, data unacknowledged or queued) finish until ctx is done, closes
// the rest, and stops the event loops and the wheel.
//
// Every wait is bounded by ctx. If ctx ends first, Shutdown cuts the busy
// connections, asks the engine to stop and returns ctx's error without
// waiting for it; Done is closed once the engine and the wheel have stopped,
// and after that no goroutine or timer of the server remains. Shutdown is
// idempotent: later calls return the first one's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

// ErrServerClosed is returned by Start after Shutdown.
var ErrServerClosed = errors.New("netserver: server closed")

func (s *Server) shutdown(ctx context.Context) error {
	s.shutdownCalled.Store(true)
	if s.started.CompareAndSwap(false, true) { // never started: it never will
		s.draining.Store(true)
		close(s.done)
		close(s.startDone)
		return nil
	}
	select { // a Start under way finishes first
	case <-s.startDone:
	case <-ctx.Done():
		// Out of time already: stop it as soon as it has started.
		go func() {
			<-s.startDone
			s.cut(context.Background())
		}()
		return ctx.Err()
	}
	select {
	case <-s.done: // never booted, or already stopped
		return nil
	default:
	}
	s.draining.Store(true)
	s.stopAccepting()
	s.checkDrained()
	// Close the idle connections now, and the busy ones as they become
	// idle: most do so on their own traffic (OnTraffic checks), but one
	// whose output drains with no more input would not, so look again
	// every 20ms.
	closeIdle := func() { s.closeOnLoops((*Conn).isIdle) }
	closeIdle()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case <-s.drained:
			break wait
		case <-tick.C:
			s.checkDrained()
			closeIdle()
		case <-ctx.Done():
			err = ctx.Err()
			s.log.Warn("netserver: shutdown deadline passed, closing busy connections", "open", s.open.Load())
			s.closeOnLoops(func(*Conn) bool { return true })
			break wait
		}
	}
	// gnet closes whatever is left; with ctx done, Stop only asks.
	if serr := s.eng.Stop(ctx); serr != nil && err == nil {
		err = fmt.Errorf("netserver: stop engine: %w", serr)
	}
	select {
	case <-s.done:
		s.log.Info("netserver: stopped", "accepted", s.accepted.Load())
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
		s.log.Warn("netserver: shutdown deadline passed before the event loops stopped; they stop in the background (see Done)")
	}
	return err
}

// cut stops the server at once: no new connections, every open one
// closed, the engine asked to stop (Done closes when it has).
func (s *Server) cut(ctx context.Context) {
	select {
	case <-s.done:
		return
	default:
	}
	s.draining.Store(true)
	s.stopAccepting()
	s.closeOnLoops(func(*Conn) bool { return true })
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_ = s.eng.Stop(canceled) // only asks
}

// stopAccepting closes the server's listening sockets, leaving gnet a
// harmless descriptor in their place (retireListener). Where that cannot be
// done, OnOpen goes on closing new connections with ReasonShutdown.
func (s *Server) stopAccepting() {
	select {
	case <-s.done: // gnet has closed the listeners, and their descriptors may be reused
		return
	default:
	}
	var err error
	if len(s.listeners) == 0 {
		_, err = findListeners(s.addr) // says why: not Linux, or none found
		if err == nil {
			err = errors.New("netserver: no listening socket of the server found")
		}
	}
	for _, id := range s.listeners {
		if rerr := retireListener(id); rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		s.log.Warn("netserver: shutdown: could not close the listener first; new connections are closed on arrival instead", "err", err)
		return
	}
	s.log.Info("netserver: shutdown: stopped accepting", "addr", s.addr.String(), "listeners", len(s.listeners))
}

// closeOnLoops asks every event loop to close, with ReasonShutdown, its
// connections for which which returns true.
func (s *Server) closeOnLoops(which func(*Conn) bool) {
	for _, l := range *s.loops.Load() {
		_ = l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			// From the end: a close removes c, moving the last
			// connection, already seen, to c's slot.
			for i := len(l.conns) - 1; i >= 0; i-- {
				if i < len(l.conns) {
					if c := l.conns[i]; which(c) {
						c.closeWith(ReasonShutdown)
					}
				}
			}
			return nil
		}))
	}
}

func (s *Server) checkDrained() {
	if s.draining.Load() && s.open.Load() == 0 {
		s.drainedOnce.Do(func() { close(s.drained) })
	}
}

// Stats is a snapshot of a Server's counters.
type Stats struct {
	Open          int64            // connections open now
	Accepted      int64            // connections accepted since Start
	Closed        map[string]int64 // closed connections by Reason name
	TimersPending int              // timers pending in the wheel
	Expiries      int64            // timer expiries handed to event loops
	Probes        int64            // keepalive probes sent
	Retransmits   int64            // DATA frames retransmitted
	GiveUps       int64            // connections closed by retransmission give-up
}

// Stats returns a snapshot of the server's counters. Any goroutine.
func (s *Server) Stats() Stats {
	st := Stats{
		Open:        s.open.Load(),
		Accepted:    s.accepted.Load(),
		Closed:      map[string]int64{},
		Expiries:    s.expiries.Load(),
		Probes:      s.probes.Load(),
		Retransmits: s.retransmits.Load(),
		GiveUps:     s.closed[ReasonGiveUp].Load(),
	}
	if w := s.wheelPub.Load(); w != nil {
		st.TimersPending = w.Len()
	}
	for r := ReasonNone + 1; int(r) < numReasons; r++ {
		if n := s.closed[r].Load(); n != 0 {
			st.Closed[r.String()] = n
		}
	}
	return st
}

// MetricsHandler serves the server's metrics, with the Go runtime and
// process metrics, in the Prometheus text format, from a registry of the
// server's own: the same whether or not Config.Registerer also receives
// them. Any goroutine.
func (s *Server) MetricsHandler() http.Handler { return s.m.handler }

// handOff runs on the wheel's goroutine after each batch of expiries: one
// Execute per event loop that has expired connections.
func (s *Server) handOff() {
	for _, l := range *s.loops.Load() {
		if l.head.Load() != nil && l.scheduled.CompareAndSwap(false, true) {
			if err := l.el.Execute(context.Background(), l.run); err != nil {
				// Shutting down: the engine closes every connection (OnClose
				// stops its timers); what stays on the list is never run.
				l.scheduled.Store(false)
			}
		}
	}
}

// runExpiries runs on the event loop: it takes every connection the wheel
// handed over and acts on its expiries. A connection closed since is skipped.
func (l *loop) runExpiries(context.Context) error {
	l.scheduled.Store(false)
	c := l.takeExpired()
	for c != nil {
		next := c.next
		c.next = nil
		c.flags.And(^uint32(flagQueued))
		ev := c.events.Swap(0)
		if !c.closed && !c.closing {
			l.s.expiries.Add(1)
			l.s.safely(c, func() { c.handleEvents(ev) })
		}
		c = next
	}
	return nil
}

// takeExpired empties the loop's list of expired connections and returns
// it in the order the wheel handed them over. The list is a stack (each
// post pushes on its head), so it is reversed: under a burst of expiries the
// first connection due is closed first, not after every later one.
func (l *loop) takeExpired() *Conn {
	var first *Conn
	for c := l.head.Swap(nil); c != nil; {
		next := c.next
		c.next = first
		first, c = c, next
	}
	return first
}

func (s *Server) loopFor(el gnet.EventLoop) *loop {
	s.loopsMu.Lock()
	defer s.loopsMu.Unlock()
	if l, ok := s.byEL[el]; ok {
		return l
	}
	l := &loop{s: s, el: el}
	l.run = l.runExpiries
	l.runAsync = l.runAsyncTasks
	s.byEL[el] = l
	loops := append(append([]*loop(nil), *s.loops.Load()...), l)
	s.loops.Store(&loops)
	return l
}

// addConn adds c to the loop's open connections, at the end. O(1)
// amortized; a slice of pointers with an index in each Conn costs a
// connection about 10 bytes where a map[*Conn] cost 20 to 35. On the loop.
func (l *loop) addConn(c *Conn) {
	c.slot = int32(len(l.conns))
	l.conns = append(l.conns, c)
}

// minShrink is the capacity below which the loop's slice of connections
// is not shrunk.
const minShrink = 1024

// removeConn removes c from the loop's open connections, moving the last
// one to its slot, and lets most of the slice go once a quarter of it is
// in use, so that a burst of connections does not hold memory after it
// ends. O(1) amortized. On the loop.
func (l *loop) removeConn(c *Conn) {
	i, last := int(c.slot), len(l.conns)-1
	if i > last || l.conns[i] != c {
		return // not added (it never opened fully)
	}
	moved := l.conns[last]
	l.conns[i], moved.slot = moved, int32(i)
	l.conns[last] = nil
	l.conns = l.conns[:last]
	if cap(l.conns) >= minShrink && len(l.conns) < cap(l.conns)/4 {
		l.conns = append(make([]*Conn, 0, cap(l.conns)/2), l.conns...)
	}
}

// safely runs f, turning a panic into a close with ReasonPanic.
func (s *Server) safely(c *Conn, f func()) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("netserver: handler panicked; closing the connection",
				"remote", remote(c), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if c.closed {
				return // it closed (and was counted) before the panic
			}
			c.closing = false // let closeWith run
			c.closeWith(ReasonPanic)
		}
	}()
	f()
}

func remote(c *Conn) string {
	if c == nil || c.gc == nil || c.gc.RemoteAddr() == nil {
		return ""
	}
	return c.gc.RemoteAddr().String()
}

// events implements gnet.EventHandler.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

func (e *events) OnBoot(eng gnet.Engine) gnet.Action {
	s := e.s
	s.eng = eng
	s.addr = listenAddr(eng, s.cfg.Addr)
	close(s.booted)
	return gnet.None
}

// listenAddr asks the kernel which address the listener got (the port may
// have been 0).
func listenAddr(eng gnet.Engine, cfgAddr string) net.Addr {
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

func (e *events) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	s.accepted.Add(1)
	l := s.loopFor(gc.EventLoop())
	now := l.event()
	var c *Conn
	if s.cfg.Protocol == Framed {
		fc := &framedConn{framed: framed{recvNext: 1, sendNext: 1}}
		c = &fc.Conn
		c.f = &fc.framed
	} else {
		c = &Conn{}
	}
	c.gc, c.l, c.s = gc, l, s
	gc.SetContext(c)
	// Reserve a place first, so event loops opening connections at the same
	// time cannot overshoot MaxConns together.
	n := s.open.Add(1)
	var reject Reason
	switch {
	case s.draining.Load():
		reject = ReasonShutdown
	case s.maxConns > 0 && n > s.maxConns:
		reject = ReasonOverload
	}
	if reject != ReasonNone {
		s.open.Add(-1)
		s.checkDrained()
		c.rejected = true
		c.closing = true
		c.reason = reject
		if s.cfg.Protocol == Framed {
			return frame.AppendClose(nil, closeCode(reject), reject.String()), gnet.Close
		}
		return nil, gnet.Close
	}

	// Only the hooks the configuration calls: each is an allocation.
	hooks := idle.Hooks{Close: func(r idle.Reason) { c.postClose(r) }}
	if s.idleCfg.KeepaliveTime > 0 {
		hooks.Probe = func() { c.post(evProbe) }
	}
	if s.idleCfg.MaxAgeGrace > 0 && s.cfg.Protocol == Framed {
		// Only Framed tells the peer, and only a grace leaves time to.
		hooks.Drain = func() { c.post(evDrain) }
	}
	tr, err := idle.NewAt(s.wheel, now, s.idleCfg, hooks)
	if err != nil { // validated in New; cannot happen
		s.log.Error("netserver: idle tracker", "err", err)
		s.open.Add(-1)
		c.rejected, c.closing, c.reason = true, true, ReasonPanic
		return nil, gnet.Close
	}
	c.idle = tr
	if s.cfg.Protocol == Framed {
		err := c.f.rtx.Init(s.wheel, s.cfg.Retransmit, retransmit.Handlers{
			Retransmit: func(uint64, int) { c.post(evRetransmit) },
			GiveUp:     func(error) { c.postClose(ReasonGiveUp) },
			Sample:     func(rtt time.Duration) { s.m.rtt.Observe(rtt.Seconds()) },
		})
		if err != nil {
			s.log.Error("netserver: retransmit tracker", "err", err)
			tr.Stop()
			s.open.Add(-1)
			c.rejected, c.closing, c.reason = true, true, ReasonPanic
			return nil, gnet.Close
		}
	}
	if s.cfg.Kernel.UserTimeout > 0 {
		if err := setUserTimeout(gc.Fd(), s.cfg.Kernel.UserTimeout); err != nil {
			s.log.Debug("netserver: TCP_USER_TIMEOUT", "err", err)
		}
	}
	l.addConn(c)
	l.inEvent = c // closeWith must not close inside OnOpen: return gnet.Close
	s.safely(c, func() { s.h.OnOpen(c) })
	l.inEvent = nil
	l.flushOwner()
	if c.closing && !c.closed {
		return nil, gnet.Close
	}
	return nil, gnet.None
}

// event starts an OnOpen or OnTraffic call of the loop: it reads the wheel's
// clock, once, for everything the event stamps or arms (see clock), and
// returns it.
func (l *loop) event() time.Duration {
	l.now = l.s.wheel.Now()
	return l.now
}

// clock returns the time to stamp events and arm timers with, on the loop:
// inside an OnOpen or OnTraffic call, the time read at its start; outside
// one (a task the wheel handed over), the time now. One clock read per
// event (about 26 ns here) serves every stamp and arming in it
// (docs/design.md).
func (l *loop) clock() time.Duration {
	if l.inEvent != nil {
		return l.now
	}
	return l.s.wheel.Now()
}

func (e *events) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.Close
	}
	if c.closing {
		_, _ = gc.Discard(-1)
		return gnet.Close
	}
	s := e.s
	l := c.l
	l.event()
	l.inEvent = c
	s.safely(c, func() {
		if s.cfg.Protocol == Raw {
			c.onRaw()
		} else {
			c.onFramed()
		}
	})
	l.inEvent = nil
	l.flushOwner()
	if !c.closing && s.draining.Load() && c.isIdle() {
		l.inEvent = c
		c.closeWith(ReasonShutdown)
		l.inEvent = nil
		l.flushOwner()
	}
	if c.closing {
		return gnet.Close
	}
	return gnet.None
}

func (c *Conn) onRaw() {
	s := c.s
	buf, _ := c.gc.Peek(-1)
	if len(buf) == 0 {
		return
	}
	if now := c.l.clock(); s.cfg.HandlerMarks {
		c.idle.BytesInAt(now)
	} else {
		c.idle.ReceivedAt(now)
		c.HandshakeDone()
	}
	sh, ok := s.h.(StreamHandler)
	if !ok {
		s.h.OnMessage(c, buf)
		_, _ = c.gc.Discard(len(buf))
		return
	}
	n := min(max(sh.OnStream(c, buf), 0), len(buf))
	switch {
	case c.closing:
		_, _ = c.gc.Discard(-1)
	case len(buf)-n > s.maxFrame:
		_, _ = c.gc.Discard(-1)
		c.s.log.Warn("netserver: a handler left more input than MaxFrame", "remote", remote(c),
			"left_bytes", len(buf)-n, "max_frame", s.maxFrame)
		c.closeWith(ReasonTooLarge)
	case n > 0:
		// Never Discard(0): gnet's Discard(n <= 0) empties the whole buffer.
		_, _ = c.gc.Discard(n)
	}
}

func (c *Conn) onFramed() {
	now := c.l.clock()
	c.idle.BytesInAt(now)
	if c.gc.InboundBuffered() < int(c.need) {
		return // the frame under way is still short: do not look at it again
	}
	buf, _ := c.gc.Peek(-1)
	c.l.peeks.Add(1)
	used := c.parseFrames(buf, now)
	if c.closing {
		_, _ = c.gc.Discard(-1)
		return
	}
	if used > 0 {
		// Never Discard(0): gnet's Discard(n <= 0) empties the whole buffer.
		_, _ = c.gc.Discard(used)
	}
}

// parseFrames acts on every whole frame at the start of buf and reports how
// many bytes they took. It leaves c.need at what the next frame needs in
// all, and starts the frame deadline if part of one is there.
func (c *Conn) parseFrames(buf []byte, now time.Duration) (used int) {
	s := c.s
	needAck := false
	for !c.closing {
		rest := buf[used:]
		f, n, err := frame.Parse(rest, s.maxFrame)
		if errors.Is(err, frame.ErrShort) {
			// Until a frame's length is known, any byte is worth a look:
			// its first byte starts the frame deadline.
			c.need = int32(len(rest) + 1) // below LenSize+1
			if len(rest) >= frame.LenSize {
				c.need = frame.LenSize + int32(binary.BigEndian.Uint32(rest)) // ErrShort: at most MaxFrame, 1 GiB
			}
			if len(rest) > 0 && !c.inFrame {
				c.inFrame = true
				c.idle.FrameStartAt(now)
			}
			break
		}
		if err != nil {
			if errors.Is(err, frame.ErrTooLarge) {
				c.closeWith(ReasonTooLarge)
			} else {
				c.closeWith(ReasonProtocol)
			}
			break
		}
		used += n
		c.need = 0
		if c.inFrame {
			c.inFrame = false
			c.idle.FrameEnd()
		}
		if !c.handshook {
			c.handshook = true
			c.idle.HandshakeDone()
		}
		switch f.Type {
		case frame.TypeData:
			switch {
			case f.Seq == c.f.recvNext:
				c.f.recvNext++
				c.idle.ActivityAt(now)
				needAck = true
				s.h.OnMessage(c, f.Payload)
			case f.Seq < c.f.recvNext:
				needAck = true // a retransmission: acknowledge again, deliver once
			default:
				c.closeWith(ReasonProtocol)
			}
		case frame.TypeAck:
			if f.Seq >= c.f.sendNext {
				c.closeWith(ReasonProtocol)
				break
			}
			if f.Seq > c.f.ackedTo {
				c.f.rtx.AckedThrough(f.Seq, now)
				c.f.unacked.pop(int(f.Seq - c.f.ackedTo))
				c.f.ackedTo = f.Seq
			}
		case frame.TypePing:
			if !c.allowPing(now) {
				c.closeWith(ReasonPingFlood)
				break
			}
			l := c.own()
			l.out = frame.AppendPong(l.out, f.Nonce)
		case frame.TypePong:
		case frame.TypeClose:
			c.sentClose = true // the peer is going: no need to tell it
			c.closeWith(ReasonPeerClosed)
		}
	}
	if needAck && !c.closing {
		l := c.own()
		l.out = frame.AppendAck(l.out, c.f.recvNext-1)
	}
	return used
}

func (e *events) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok || c.closed {
		return gnet.None
	}
	s := e.s
	c.closed = true
	if c.reason == ReasonNone {
		switch {
		case err == nil && s.draining.Load():
			c.reason = ReasonShutdown
		case err == nil:
			c.reason = ReasonServerClosed
		case errors.Is(err, io.EOF):
			c.reason = ReasonPeerClosed
		default:
			c.reason = ReasonError
		}
	}
	s.closed[c.reason].Add(1)
	if c.rejected {
		s.log.Debug("netserver: connection refused", "remote", remote(c), "reason", c.reason.String())
		return gnet.None
	}
	c.idle.Stop()
	if s.cfg.Protocol == Framed {
		c.f.rtx.Close()
	}
	if c.out != nil {
		c.out.timer.Stop()
	}
	var unackedBytes, unackedMsgs int
	if c.f != nil {
		unackedBytes, unackedMsgs = c.f.unacked.bytes(), c.f.unacked.len()
		c.f.unacked.reset(true)
	}
	c.l.removeConn(c)
	if c.l.owner == c { // output queued for a connection that is gone
		c.l.owner = nil
		c.l.out = c.l.out[:0]
	}
	s.open.Add(-1)
	level := closeLevel(c.reason, err)
	if s.log.Enabled(context.Background(), level) {
		attrs := []any{"remote", remote(c), "reason", c.reason.String()}
		switch {
		case err != nil && c.reason == ReasonError:
			attrs = append(attrs, "err", err.Error())
		case c.reason == ReasonUnackedLimit:
			attrs = append(attrs, "unacked_bytes", unackedBytes, "unacked_messages", unackedMsgs,
				"limit_bytes", s.lim.unackedBytes)
		}
		s.log.Log(context.Background(), level, "netserver: connection closed", attrs...)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("netserver: handler panicked in OnClose", "panic", fmt.Sprint(p))
			}
		}()
		s.h.OnClose(c, c.reason)
	}()
	s.checkDrained()
	return gnet.None
}

// peerGone reports whether err, a read or write error, says only that the
// peer went away: it reset the connection, closed it under a write, or
// stopped answering TCP's retransmissions or keepalives.
func peerGone(err error) bool {
	return errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ETIMEDOUT)
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

// closeLevel is the level a close for r is logged at: debug for the ends
// of a connection's normal life (the peer closed, it was idle, it reached
// its maximum age, the server closed it or shut down), which the metrics
// count and which would otherwise cost a line per connection when many
// idle connections are reaped at once; info for a timeout that finds a
// peer gone or too slow; warn for a peer that broke the protocol or a
// limit, and for errors, but for the errors that only say the peer went
// away (ECONNRESET, EPIPE, ETIMEDOUT), which are routine on real networks
// and at info, so that a peer resetting its connections cannot bury real
// errors. Such a close is still counted under ReasonError.
func closeLevel(r Reason, err error) slog.Level {
	if r == ReasonError && peerGone(err) {
		return slog.LevelInfo
	}
	switch r {
	case ReasonDeadPeer, ReasonKeepalive, ReasonFrameDeadline, ReasonHandshake, ReasonWriteStall, ReasonGiveUp:
		return slog.LevelInfo
	case ReasonProtocol, ReasonTooLarge, ReasonOverload, ReasonPanic, ReasonError, ReasonOutputLimit, ReasonUnackedLimit,
		ReasonPingFlood:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}
