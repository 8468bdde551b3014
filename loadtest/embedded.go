package main

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/retransmit"
)

// This file is the only one that knows netserver: it builds the embedded
// netwheel server from the harness's timeout flags.

// netwheelConfig translates the harness's description of the server's
// timeouts into a netserver.Config. The server has the timeouts the
// harness's flags name, and no other: a flag's 0 is off (idle.Off), where
// netserver's 0 is its default (so the handshake timeout is off unless
// -handshake gives it), and the max-age and write-stall timeouts, which no
// scenario judges, are off.
func netwheelConfig(o *options) netserver.Config {
	t := o.timeouts
	proto := netserver.Raw
	if o.proto == attack.Framed {
		proto = netserver.Framed
	}
	cfg := netserver.Config{
		Addr: "127.0.0.1:0", Protocol: proto, Tick: t.Tick, MaxConns: o.maxConns, SilentShutdown: true,
		Timeouts: idle.Config{IdleTimeout: orOff(t.Idle), FrameTimeout: orOff(t.Frame),
			HandshakeTimeout: orOff(t.Handshake), MaxAge: idle.Off, WriteStallTimeout: idle.Off},
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = netserver.Off // -max-conns 0 is no limit, where netserver's 0 derives one
	}
	edgeConfig(o, &cfg)
	// The hostile scenarios judge the server's memory by these limits.
	cfg.Limits.OutputHard = int(o.outputLimit)
	if cfg.Limits.OutputHard < netserver.DefaultOutputSoft {
		cfg.Limits.OutputSoft = cfg.Limits.OutputHard / 2
	}
	if cfg.Protocol == netserver.Framed {
		cfg.Limits.UnackedBytes = int(o.unackedLimit)
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

// netwheelServer adapts *netserver.Server to embeddedServer.
type netwheelServer struct{ s *netserver.Server }

func startNetserver(o *options) (embeddedServer, error) {
	s, err := netserver.New(netwheelConfig(o), netserver.Echo{})
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return netwheelServer{s}, nil
}

func (n netwheelServer) Addr() net.Addr                     { return n.s.Addr() }
func (n netwheelServer) Shutdown(ctx context.Context) error { return n.s.Shutdown(ctx) }

// MetricsHandler serves the server's Prometheus metrics, which hold its
// own close delay (observe.CloseDelayMetric).
func (n netwheelServer) MetricsHandler() http.Handler { return n.s.MetricsHandler() }

func (n netwheelServer) Stats() report.Server {
	st := n.s.Stats()
	return report.Server{Kind: kindNetwheel, Open: st.Open, Accepted: st.Accepted, Closes: st.Closed,
		TimersPending: int64(st.TimersPending), Expiries: st.Expiries, Probes: st.Probes,
		Retransmits: st.Retransmits, GiveUps: st.GiveUps}
}
