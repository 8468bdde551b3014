package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/internal/version"
	"github.com/netwheel/netwheel/netserver"
)

// Exit statuses of run.
const (
	exitOK    = 0
	exitError = 1 // a runtime error, or a shutdown that cut busy connections
	exitUsage = 2 // bad flags or a configuration netserver refuses
)

// Bounds of the metrics server, so that scrapers, idle or hostile, hold
// few of the descriptors -max-conns leaves (fdlimit.Reserve) and none for
// long. The read timeout stops a body announced and never sent; pprof
// extends the write timeout by the seconds a profile or trace asks for;
// more connections than metricsMaxConns wait in the kernel's accept queue.
const (
	metricsReadHeaderTimeout = 10 * time.Second
	metricsReadTimeout       = 30 * time.Second
	metricsWriteTimeout      = 30 * time.Second
	metricsIdleTimeout       = 30 * time.Second
	metricsMaxConns          = 16
)

// stopWait bounds how long run waits, after Shutdown returns at its
// deadline, for the server to stop (netserver.Server.Done): the event
// loops close the connections Shutdown cut, sending each CLOSE and
// counting and logging it, in milliseconds, and an exit before that would
// leave them untold and uncounted.
const stopWait = time.Second

// run is the whole of the echo command: it parses args, serves until ctx is
// done (main cancels it on SIGINT or SIGTERM), shuts down gracefully and
// returns the exit status. Help goes to stdout; usage errors and logs go to
// stderr. run may be called from any goroutine, more than once.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, o, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if o.version {
		fmt.Fprintln(stdout, version.String("echo"))
		return exitOK
	}
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel})
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.logLevel})
	}
	log := slog.New(h)
	cfg.Logger = log
	srv, err := netserver.New(cfg, netserver.Echo{})
	if err != nil {
		fmt.Fprintf(stderr, "echo: %v (run echo -h for help)\n", err)
		return exitUsage
	}

	var mln net.Listener
	if o.metricsAddr != "" {
		if mln, err = net.Listen("tcp", o.metricsAddr); err != nil {
			log.Error("echo: metrics listener", "err", err)
			return exitError
		}
		mln = newLimitListener(mln, metricsMaxConns)
	}
	if err := srv.Start(); err != nil {
		if mln != nil {
			mln.Close()
		}
		log.Error("echo: start", "err", err)
		return exitError
	}

	var hs *http.Server
	metricsDone := make(chan error, 1)
	if mln != nil {
		hs = metricsServer(srv, o, log)
		go func() { metricsDone <- hs.Serve(mln) }()
	}
	log.Info("echo: serving", effectiveConfig(srv, cfg, o, mln)...)

	code := exitOK
	select {
	case <-ctx.Done():
		log.Info("echo: shutting down", "grace", off(o.shutdownTimeout))
	case err := <-metricsDone:
		log.Error("echo: metrics server failed, shutting down", "err", err)
		metricsDone <- err // for the wait below
		code = exitError
	case <-srv.Done():
		log.Error("echo: the server stopped by itself", "err", srv.Err())
		code = exitError
	}
	// The grace period runs on its own clock: ctx is already done. With
	// no grace (off), the connections left are cut at once.
	began := time.Now()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(o.shutdownTimeout, 0))
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	select {
	case <-srv.Done():
	case <-time.After(stopWait):
		log.Error("echo: the server did not stop in time after the shutdown deadline", "wait", stopWait.String())
		code = exitError
	}
	// A deadline that passed with nothing left to cut is a clean shutdown.
	st := srv.Stats()
	if st.Cut > 0 {
		log.Warn("echo: shutdown deadline passed; cut the connections left", "err", shutdownErr, "cut", st.Cut, "grace", off(o.shutdownTimeout))
		code = exitError
	}
	log.Info("echo: drained", "took", time.Since(began).String(), "cut", st.Cut,
		"closed_shutdown", st.Closed[netserver.ReasonShutdown.String()], "open", st.Open)
	if hs != nil {
		// Metrics stay up while connections drain; then stop the server,
		// cutting requests (a long pprof profile) that outlive the grace.
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		<-metricsDone
	}
	log.Info("echo: stopped", "exit", code)
	return code
}

// metricsMux routes /metrics to the server's Prometheus handler and, with
// withPprof, /debug/pprof/ to net/http/pprof, on a mux of its own; any
// other path is 404.
func metricsMux(srv *netserver.Server, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv.MetricsHandler())
	if !withPprof {
		return mux
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also serves the named profiles: heap, goroutine, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// effectiveConfig lists the settings the server runs with as log
// attributes: the actual listen addresses, and the Config as netserver
// resolves it (Config.WithDefaults), "off" where a protection is off.
// Durations are strings so that JSON logs read as well as text ones.
func effectiveConfig(srv *netserver.Server, cfg netserver.Config, o options, mln net.Listener) []any {
	cfg, _ = cfg.WithDefaults() // New accepted it
	size := func(n int) string {
		if n < 0 {
			return "off"
		}
		return fmt.Sprint(n)
	}
	sys := func(d time.Duration) string {
		if d == 0 {
			return "system"
		}
		return d.String()
	}
	metrics := "off"
	if mln != nil {
		metrics = mln.Addr().String()
	}
	maxConns := "none"
	if n := cfg.MaxConns; n > 0 {
		maxConns = fmt.Sprint(n)
	} else if n := fdlimit.MaxConns(o.openFiles, srv.EventLoops()); n > 0 && cfg.MaxConns == 0 {
		maxConns = fmt.Sprint(n) // as Start derives it
	}
	openFiles := "unknown"
	if o.openFiles > 0 {
		openFiles = fmt.Sprint(o.openFiles)
	}
	l := cfg.Limits
	limits := []any{"output_hard", size(l.OutputHard), "output_soft", size(l.OutputSoft), "output_soft_for", off(l.OutputSoftFor)}
	if cfg.Protocol == netserver.Framed {
		limits = append(limits, "unacked_bytes", size(l.UnackedBytes), "pings_per_second", size(l.PingsPerSecond))
	}
	t, k := cfg.Timeouts, cfg.Kernel
	kaCount := "off"
	if t.KeepaliveTime > 0 {
		kaCount = fmt.Sprint(t.KeepaliveCount)
	}
	attrs := []any{
		"addr", srv.Addr().String(),
		"proto", cfg.Protocol.String(),
		"event_loops", srv.EventLoops(),
		"gomaxprocs", runtime.GOMAXPROCS(0),
		"reuse_port", cfg.ReusePort,
		"tick", cfg.Tick.String(),
		"max_conns", maxConns,
		"open_files", openFiles,
		slog.Group("limits", limits...),
		slog.Group("timeouts",
			"idle", off(t.IdleTimeout),
			"read_silence", off(t.ReadSilenceTimeout),
			"keepalive_time", off(t.KeepaliveTime),
			"keepalive_timeout", off(t.KeepaliveTimeout),
			"keepalive_count", kaCount,
			"frame", off(t.FrameTimeout),
			"handshake", off(t.HandshakeTimeout),
			"max_age", off(t.MaxAge),
			"max_age_jitter", off(t.MaxAgeJitter),
			"max_age_grace", off(t.MaxAgeGrace),
			"write_stall", off(t.WriteStallTimeout),
		),
	}
	if cfg.Protocol == netserver.Framed {
		r := cfg.Retransmit
		attrs = append(attrs,
			"max_frame", cfg.MaxFrame,
			slog.Group("retransmit",
				"initial_rto", r.InitialRTO.String(),
				"min_rto", r.MinRTO.String(),
				"max_rto", r.MaxRTO.String(),
				"granularity", r.Granularity.String(),
				"variant", r.Variant.String(),
				"max_retransmits", size(r.MaxRetransmits),
				"give_up_after", off(r.GiveUpAfter),
				"window", r.Window,
			),
			"silent_shutdown", cfg.SilentShutdown,
		)
	}
	interval, count := tcpKeepalive(k)
	return append(attrs,
		slog.Group("tcp",
			"keepalive_idle", sys(k.KeepaliveIdle),
			"keepalive_interval", interval,
			"keepalive_count", count,
			"user_timeout", sys(k.UserTimeout),
		),
		"shutdown_timeout", off(o.shutdownTimeout),
		"metrics", metrics,
		"pprof", o.pprof,
	)
}

// off is a duration as logged: "off" for none (0 or Off).
func off(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return d.String()
}

// tcpKeepalive reports the interval and count the kernel's keepalive will
// use: with -tcp-keepalive-idle set, gnet fills a zero interval with a
// fifth of it and a zero count with 5 (netserver.KernelConfig).
func tcpKeepalive(k netserver.KernelConfig) (interval, count string) {
	if k.KeepaliveIdle == 0 {
		return "system", "system"
	}
	return cmp.Or(k.KeepaliveInterval, k.KeepaliveIdle/5).String(), fmt.Sprint(cmp.Or(k.KeepaliveCount, 5))
}

// metricsServer is the HTTP server of -metrics, with the bounds above; its
// listener is limited to metricsMaxConns by run.
func metricsServer(srv *netserver.Server, o options, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           metricsMux(srv, o.pprof),
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
