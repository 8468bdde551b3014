// Package embedded runs the netwheel server a load test without -addr
// drives: netserver's echo, with the timeouts the harness's flags name and
// no other, and reports its counters and its own close delay once every
// client has closed. It is the only package of the harness that knows
// netserver. A Server's methods may be called from any goroutine.
package embedded

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/loadtest/internal/lag"
	"github.com/netwheel/netwheel/loadtest/internal/observe"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/retransmit"
)

// Options is what the harness's flags say of the server.
type Options struct {
	Proto                     scenario.Proto
	Timeouts                  report.Timeouts // 0: off
	MaxConns                  int             // 0: no limit
	OutputLimit, UnackedLimit int64           // per connection, bytes
	// Proxy: the server requires the PROXY protocol from this host
	// (loadtest -proxy); MaxConnsPerSource is its per-source limit (0:
	// none).
	Proxy             bool
	MaxConnsPerSource int
}

// Config translates the harness's description of the server's
// timeouts into a netserver.Config. The server has the timeouts the
// harness's flags name, and no other: a flag's 0 is off (idle.Off), where
// netserver's 0 is its default (so the handshake timeout is off unless
// -handshake gives it), and the max-age and write-stall timeouts, which no
// scenario judges, are off.
func Config(o Options) netserver.Config {
	t := o.Timeouts
	proto := netserver.Raw
	if o.Proto == scenario.Framed {
		proto = netserver.Framed
	}
	cfg := netserver.Config{
		Addr: "127.0.0.1:0", Protocol: proto, Tick: t.Tick, MaxConns: o.MaxConns, SilentShutdown: true,
		Timeouts: idle.Config{IdleTimeout: orOff(t.Idle), FrameTimeout: orOff(t.Frame),
			HandshakeTimeout: orOff(t.Handshake), MaxAge: idle.Off, WriteStallTimeout: idle.Off},
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = netserver.Off // -max-conns 0 is no limit, where netserver's 0 derives one
	}
	if o.Proxy {
		cfg.ProxyProtocol = netserver.ProxyRequired
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	cfg.MaxConnsPerSource = o.MaxConnsPerSource
	if cfg.MaxConnsPerSource == 0 {
		cfg.MaxConnsPerSource = netserver.Off // as MaxConns
	}
	// The hostile scenarios judge the server's memory by these limits.
	cfg.Limits.OutputHard = int(o.OutputLimit)
	if cfg.Limits.OutputHard < netserver.DefaultOutputSoft {
		cfg.Limits.OutputSoft = cfg.Limits.OutputHard / 2
	}
	if cfg.Protocol == netserver.Framed {
		cfg.Limits.UnackedBytes = int(o.UnackedLimit)
	}
	// The client's goroutines share the Ps, so the P netserver leaves spare
	// by default does not stay idle for the wheel anyway, and a loop per P
	// serves the client's load better.
	cfg.EventLoops = runtime.GOMAXPROCS(0)
	if proto == netserver.Framed {
		cfg.Timeouts.KeepaliveTime = orOff(t.KeepaliveTime)
		cfg.Timeouts.KeepaliveTimeout = t.KeepaliveTimeout
		cfg.Timeouts.KeepaliveCount = t.KeepaliveCount
		cfg.Retransmit = retransmit.Config{InitialRTO: t.InitialRTO, MinRTO: t.MinRTO, MaxRTO: t.MaxRTO,
			MaxRetransmits: t.MaxRetransmits, GiveUpAfter: t.GiveUpAfter}
	} else {
		cfg.Timeouts.FrameTimeout = idle.Off
	}
	return cfg
}

// orOff is d, or idle.Off for a harness flag's 0.
func orOff(d time.Duration) time.Duration {
	if d == 0 {
		return idle.Off
	}
	return d
}

// Server is a running embedded server.
type Server struct {
	s    *netserver.Server
	peak atomic.Int64 // the most connections open at a Sample
}

// Start starts the server o describes on a loopback port.
func Start(o Options) (*Server, error) {
	s, err := netserver.New(Config(o), netserver.Echo{})
	if err != nil {
		return nil, err
	}
	return &Server{s: s}, s.Start()
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return s.s.Addr().String() }

// Sample records the connections open now, for the peak.
func (s *Server) Sample() { s.peak.Store(max(s.peak.Load(), s.s.Stats().Open)) }

// stats is the server's counters as a result holds them.
func (s *Server) stats() report.Server {
	st := s.s.Stats()
	return report.Server{Kind: "netwheel", Open: st.Open, Accepted: st.Accepted, Closes: st.Closed,
		TimersPending: int64(st.TimersPending), Expiries: st.Expiries, Probes: st.Probes,
		Retransmits: st.Retransmits, GiveUps: st.GiveUps, PeakOpen: s.peak.Load()}
}

// settleRunning is how long the server is given to get back to no
// connection and no timer once every client has closed, counted in time
// this process was running (lag.WaitRunning); settleBound bounds the wait
// on a machine that starves it.
const (
	settleRunning = 2 * time.Second
	settleBound   = 30 * time.Second
)

// Finish, once every client has closed, waits for the server to get back
// to no connection and no timer, records its counters (res.Server), a
// leak if it did not (res.Leaks) and its own close delay (res.CloseDelay),
// and shuts it down.
func (s *Server) Finish(res *report.Result) {
	lag.WaitRunning(settleRunning, settleBound, func() bool {
		st := s.s.Stats()
		return st.Open == 0 && st.TimersPending == 0
	})
	st := s.stats()
	res.Server = &st
	if st.Open > 0 || st.TimersPending > 0 {
		res.Leaks = append(res.Leaks, fmt.Sprintf("the server still holds %d connections and %d timers %s (of this process's running time) after every client closed", st.Open, st.TimersPending, settleRunning))
	}
	var err error
	if res.CloseDelay, err = observe.HandlerCloseDelay(s.s.MetricsHandler()); err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("server's own close delay (%s) not reported: %v", observe.CloseDelayMetric(observe.DefaultNamespace), err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.s.Shutdown(ctx); err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("server shutdown: %v", err))
	}
}
