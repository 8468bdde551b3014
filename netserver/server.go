// Package netserver is an event-loop TCP server on gnet v2 in which every
// connection gets its idle, keepalive, frame-deadline, handshake, max-age,
// write-stall and retransmission timeouts from one timing wheel, touched in
// O(1) with no allocation and no lock on every packet, and expired
// connections are reaped cleanly, each with a typed Reason that is logged
// and counted.
//
// Users implement a small Handler (or use Echo), or a StreamHandler that
// parses its own messages, and choose the Raw byte stream or the Framed
// protocol of docs/protocol.md. Expiries are delivered to each
// connection's own event loop, batched: one hand-off per loop per wheel
// tick carries all of that loop's expired connections.
//
// Configuration follows one rule, as in packages idle and retransmit: a
// zero Config field means the default it documents, Off (exactly -1) turns
// that protection off, and any other negative value is an error naming the
// field. The zero Config (but for Addr) is thus
// safe for production, every timeout and limit on; DefaultConfig spells
// those defaults out as an embedder's starting point.
package netserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/sources"
	"github.com/netwheel/netwheel/wheel"
)

// Server is a gnet v2 TCP server with per-connection timeouts. Create it
// with New, run it with Start, stop it with Shutdown. Its methods may be
// called from any goroutine.
type Server struct {
	// Set by New, read-only after.
	cfg          Config
	handler      ConnHandler
	messages     Handler       // h as a Handler, if it is one; nil if stream is used
	stream       StreamHandler // h, for a Raw server whose handler implements OnStream; else nil
	proto        protocol
	log          *slog.Logger
	metrics      *metrics
	idleCfg      idle.Config
	maxFrame     int
	stallTimeout time.Duration
	lim          limits
	outputLook   time.Duration // how often queued output is looked at (watchOutput)

	// Written by Start before gnet runs. The event loops (which gnet
	// starts after) and Shutdown read wheel; other goroutines (Stats, the
	// metrics) read it through wheelPub. Only the event loops read
	// maxConns. listeners is written before Start returns, and read by
	// Shutdown.
	wheel    *wheel.Wheel
	wheelPub atomic.Pointer[wheel.Wheel]
	maxConns int64            // the bound in force; 0: none
	sources  *sources.Counter // per-source counts (Config.MaxConnsPerSource); nil: no bound; the loops' (see sourcesPub)
	// sourcesPub is sources for other goroutines (the metrics), as
	// wheelPub is wheel.
	sourcesPub atomic.Pointer[sources.Counter]
	// countLoopback counts loopback sources too: for tests, which have no
	// other address to connect from; set before Start.
	countLoopback bool
	listeners     []listenerID // the server's own listening sockets

	gnetErr atomic.Pointer[string] // gnet's last logged error, for Err

	// eng and addr are written once in OnBoot, before booted is closed.
	eng       gnet.Engine
	addr      net.Addr
	booted    chan struct{}
	startDone chan struct{} // closed when Start returns, after a successful Start (or at once)
	done      chan struct{}
	runErr    error // written before done is closed

	loopsMu sync.Mutex
	loops   atomic.Pointer[[]*loop]  // copy-on-write under loopsMu
	byEL    map[gnet.EventLoop]*loop // under loopsMu

	open        atomic.Int64
	accepted    atomic.Int64
	closed      [numReasons]atomic.Int64
	expiries    atomic.Int64
	probes      atomic.Int64
	retransmits atomic.Int64
	cuts        atomic.Int64 // connections cut at Shutdown's deadline

	started        atomic.Bool
	shutdownCalled atomic.Bool
	loopCount      atomic.Int32 // event loops, set by Start
	draining       atomic.Bool
	drained        chan struct{} // closed when draining and no connection is open
	drainedOnce    sync.Once
	shutdownOnce   sync.Once
	shutdownErr    error // under shutdownOnce
}

// New validates cfg and builds a Server that will run h. h is a Handler
// or, for the Raw protocol, a StreamHandler; anything else, and nil, is an
// error wrapping ErrConfig. It starts nothing: call Start.
func New(cfg Config, h ConnHandler) (*Server, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	messages, stream, err := handlerFor(cfg.Protocol, h)
	if err != nil {
		return nil, err
	}
	if cfg.Protocol == Raw && cfg.Timeouts.KeepaliveTime > 0 {
		if _, ok := h.(Prober); !ok {
			return nil, fmt.Errorf("%w: Timeouts.KeepaliveTime with the raw protocol needs a Handler that implements Prober (netserver has no probe of its own to send); or use Kernel.KeepaliveIdle", ErrConfig)
		}
	}
	s := &Server{
		cfg:       cfg,
		handler:   h,
		messages:  messages,
		stream:    stream,
		log:       cfg.Logger,
		booted:    make(chan struct{}),
		startDone: make(chan struct{}),
		done:      make(chan struct{}),
		drained:   make(chan struct{}),
		byEL:      map[gnet.EventLoop]*loop{},
		maxFrame:  cfg.MaxFrame,
		proto:     protocolFor(cfg.Protocol),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	// The write-stall timeout is the server's own: only the event loop can
	// tell whether output is still queued. A Raw connection without
	// HandlerMarks has no frames, so its Tracker keeps no frame deadline
	// (WithDefaults leaves FrameTimeout zero for HandlerMarks).
	s.idleCfg = cfg.Timeouts
	s.stallTimeout = s.idleCfg.WriteStallTimeout
	s.idleCfg.WriteStallTimeout = idle.Off
	if cfg.Protocol == Raw && !cfg.HandlerMarks {
		s.idleCfg.FrameTimeout = idle.Off
	}
	s.lim = cfg.Limits.run()
	s.outputLook = outputLook(s.stallTimeout, s.lim.outputSoftFor)
	s.loops.Store(&[]*loop{})
	m, err := newMetrics(s, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// handlerFor returns h as the Handler, or the StreamHandler, that p calls
// with inbound data.
func handlerFor(p Protocol, h ConnHandler) (Handler, StreamHandler, error) {
	if h == nil {
		return nil, nil, fmt.Errorf("%w: nil handler", ErrConfig)
	}
	messages, isHandler := h.(Handler)
	stream, isStream := h.(StreamHandler)
	switch {
	case p == Raw && isStream:
		return nil, stream, nil
	case isHandler:
		return messages, nil, nil
	case p == Framed && isStream:
		return nil, nil, fmt.Errorf("%w: the framed protocol delivers messages: its handler, a %T, must implement OnMessage (Handler); OnStream (StreamHandler) is for the raw protocol", ErrConfig, h)
	}
	return nil, nil, fmt.Errorf("%w: a %T is neither a Handler (OnMessage) nor a StreamHandler (OnStream)", ErrConfig, h)
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
	Cut           int64            // connections Shutdown cut at its deadline, unfinished (counted in Closed["shutdown"] too)
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
		Cut:         s.cuts.Load(),
	}
	if w := s.wheelPub.Load(); w != nil {
		st.TimersPending = w.Len()
	}
	for r := ReasonNone + 1; r < numReasons; r++ {
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
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler }

// stopped reports whether the server has stopped, its engine ended. Any
// goroutine.
func (s *Server) stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
