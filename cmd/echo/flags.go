package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/internal/setting"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/retransmit"
)

// options are the binary's own settings, outside netserver.Config.
type options struct {
	metricsAddr     string        // "" means no metrics server
	pprof           bool          // serve /debug/pprof/ on metricsAddr
	shutdownTimeout time.Duration // grace period of Shutdown; Off: none, cut at once
	logLevel        slog.Level
	logFormat       string // "text" or "json"
	version         bool   // -version: print the version and exit
	// openFiles is the open-file limit (0: unknown), for the startup log.
	openFiles uint64
}

// Defaults of the binary's own flags.
const (
	defaultAddr            = ":9000"
	defaultShutdownTimeout = 10 * time.Second
)

const header = `Usage: echo [flags]

echo is netwheel's echo server: it sends back every byte (-proto raw) or
DATA frame (-proto framed) it receives. Its defaults are the library's
(netserver.DefaultConfig), safe for production: no peer can hold a
connection for ever. The one rule for numbers: 0 is the default shown, off
(or -1) turns a protection off, and any other negative number is an error.
Durations are Go durations: 500ms, 30s, 1h. Settings are checked by the
library, netserver, whose words the errors repeat.
Exit status: 0 after a clean shutdown, 1 on a runtime error or when the
shutdown had to cut busy connections, 2 on a usage error (a bad flag, or a
configuration the library refuses).

Flags:
`

// own are the binary's flags whose default is its own, not netserver's.
var own = map[string]bool{"addr": true, "shutdown-timeout": true, "log-level": true, "log-format": true, "version": true}

// parseFlags parses args into a netserver.Config and the binary's options.
// A setting whose flag is not given stays zero, which netserver resolves
// to its default (the help shows them, from netserver.DefaultConfig). On
// -h it writes the help to help and returns flag.ErrHelp; every other
// error is a usage error (run exits with status 2). It checks only what is
// the binary's own: the settings are netserver's to check (New). The
// Config's Logger is left nil: run builds it from the options.
func parseFlags(args []string, help io.Writer) (netserver.Config, options, error) {
	return parseFlagsLimit(args, help, fdlimit.OpenFiles())
}

// parseFlagsLimit is parseFlags under an open-file limit of openFiles
// (0 = unknown), which sets -max-conns' default as Start derives it.
func parseFlagsLimit(args []string, help io.Writer, openFiles uint64) (netserver.Config, options, error) {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; the help is written below
	fs.Usage = func() {}
	cfg := netserver.Config{Addr: defaultAddr}
	o := options{logFormat: "text", openFiles: openFiles}
	d := netserver.DefaultConfig(netserver.Framed)
	t, r, k, l := &cfg.Timeouts, &cfg.Retransmit, &cfg.Kernel, &cfg.Limits
	dt, dr, dl := d.Timeouts, d.Retransmit, d.Limits
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		*p = def
		fs.Var((*duration)(p), name, usage)
	}
	num := func(p *int, name string, def int, usage string) {
		*p = def
		fs.Var((*count)(p), name, usage)
	}

	fs.StringVar(&cfg.Addr, "addr", defaultAddr, "`address` to listen on, host:port; port 0 picks a free one")
	fs.Func("proto", "wire `protocol`: raw echoes a byte stream (nc works); framed is\nnetwheel's protocol, docs/protocol.md (default raw)", func(s string) error {
		p, err := netserver.ParseProtocol(s)
		if err != nil {
			return errors.New("want raw or framed")
		}
		cfg.Protocol = p
		return nil
	})
	num(&cfg.EventLoops, "event-loops", 0, fmt.Sprintf("gnet event `loops`; 0 is GOMAXPROCS-1, one per core, as echo runs\nGOMAXPROCS one above the cores; at most %d per core", netserver.MaxEventLoopsPerCore))
	fs.BoolVar(&cfg.ReusePort, "reuse-port", false, "set SO_REUSEPORT so that several processes can share -addr")
	num(&cfg.MaxConns, "max-conns", fdlimit.MaxConns(openFiles, max(runtime.GOMAXPROCS(0)-1, 1)),
		fmt.Sprintf("most open `connections`; more are closed on arrival. The default is the\nopen-file limit (%d here) less %d and %d per event loop; off is no limit", openFiles, fdlimit.Reserve, fdlimit.PerLoop))
	num(&cfg.MaxFrame, "max-frame", d.MaxFrame, "framed: largest frame accepted, in `bytes`")
	dur(&cfg.Tick, "tick", d.Tick, "timer wheel resolution, a `duration`: timeouts fire within a tick or two\nafter due")

	dur(&t.IdleTimeout, "idle-timeout", dt.IdleTimeout, "close after no data for a `duration`; keepalive answers are not data")
	dur(&t.ReadSilenceTimeout, "read-silence-timeout", 0, "close after no inbound byte at all for a `duration` (default none)")
	dur(&t.KeepaliveTime, "keepalive-time", dt.KeepaliveTime, "framed: send a PING after a `duration` without an inbound byte\n(raw: see -tcp-keepalive-idle)")
	dur(&t.KeepaliveTimeout, "keepalive-timeout", dt.KeepaliveTimeout, "framed: close when no byte comes within a `duration` after a PING")
	num(&t.KeepaliveCount, "keepalive-count", dt.KeepaliveCount, "framed: unanswered `PINGs` before closing")
	dur(&t.FrameTimeout, "frame-timeout", dt.FrameTimeout, "framed: most `duration` from a frame's first byte to its last")
	dur(&t.HandshakeTimeout, "handshake-timeout", dt.HandshakeTimeout, "close unless the first frame (framed) or byte (raw) comes within a\n`duration`")
	dur(&t.MaxAge, "max-age", dt.MaxAge, "close every connection after a `duration`, whatever it does")
	dur(&t.MaxAgeJitter, "max-age-jitter", dt.MaxAgeJitter, "spread each max age by +/- a `duration`; none by default with -max-age")
	dur(&t.MaxAgeGrace, "max-age-grace", 0, "after max age, let a connection finish for a `duration` (framed: it is told GOAWAY, and\ncloses once it has finished)")
	dur(&t.WriteStallTimeout, "write-stall-timeout", dt.WriteStallTimeout, "close when queued output makes no progress for a `duration`")

	num(&l.OutputHard, "output-hard", dl.OutputHard, "close a connection whose queued output would pass this many `bytes`")
	num(&l.OutputSoft, "output-soft", dl.OutputSoft, "close a connection whose queued output stays above this many `bytes`\nfor -output-soft-for")
	dur(&l.OutputSoftFor, "output-soft-for", dl.OutputSoftFor, "the `duration` queued output may stay above -output-soft")
	num(&l.UnackedBytes, "unacked-bytes", dl.UnackedBytes, "framed: most DATA payload `bytes` sent and not yet acknowledged")
	num(&l.PingsPerSecond, "pings-per-second", dl.PingsPerSecond, "framed: `PINGs` a peer may send per second; one more closes it")

	dur(&r.InitialRTO, "initial-rto", dr.InitialRTO, "framed: RTO before the first RTT sample, a `duration`")
	dur(&r.MinRTO, "min-rto", dr.MinRTO, "framed: RTO floor, a `duration`")
	dur(&r.MaxRTO, "max-rto", dr.MaxRTO, "framed: RTO cap, a `duration`, backoff included")
	dur(&r.Granularity, "rto-granularity", dr.Granularity, "framed: clock granularity G of RFC 6298, a `duration`; -tick by default")
	fs.Func("rto-variant", "framed: the RTO `variant`: rfc6298 clamps the RTO at -min-rto; linux\nfloors the variance term there, as Linux TCP does (default rfc6298)", func(s string) error {
		for _, v := range []retransmit.Variant{retransmit.RFC6298, retransmit.Linux} {
			if s == v.String() {
				r.Variant = v
				return nil
			}
		}
		return errors.New("want rfc6298 or linux")
	})
	num(&r.MaxRetransmits, "max-retransmits", dr.MaxRetransmits, "framed: `retransmissions` of one message before giving up")
	dur(&r.GiveUpAfter, "give-up-after", dr.GiveUpAfter, "framed: give up on a message unacknowledged for a `duration`")
	num(&r.Window, "window", dr.Window, fmt.Sprintf("framed: most unacknowledged `messages` per connection, at most %d", retransmit.MaxWindow))

	dur(&k.KeepaliveIdle, "tcp-keepalive-idle", 0, "TCP keepalive after a `duration` idle (TCP_KEEPIDLE; default: the\nsystem's)")
	dur(&k.KeepaliveInterval, "tcp-keepalive-interval", 0, "`duration` between TCP keepalive probes (default -tcp-keepalive-idle/5)")
	num(&k.KeepaliveCount, "tcp-keepalive-count", 0, "unanswered TCP keepalive `probes` before the kernel drops the\nconnection (default 5)")
	dur(&k.UserTimeout, "tcp-user-timeout", 0, "drop a connection whose sent data stays unacknowledged for a\n`duration` (TCP_USER_TIMEOUT; default: the system's retries)")

	dur(&o.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "on SIGINT or SIGTERM, the grace `duration` for connections to finish (framed: they are told\nGOAWAY); those left are then cut, and echo exits 1; off cuts them at once (a second\nsignal kills at once)")
	fs.BoolVar(&cfg.SilentShutdown, "silent-shutdown", false, "framed: close without sending peers a CLOSE frame first")
	edgeFlags(fs, &cfg, num)
	fs.StringVar(&o.metricsAddr, "metrics", "", "serve /metrics (Prometheus) on this `address`; keep it private")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve /debug/pprof/ on -metrics")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "least severe `level` logged: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log line `format`, to stderr: text or json")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(help, header)
			fs.SetOutput(help)
			fs.PrintDefaults()
			return cfg, o, err
		}
		return cfg, o, usageError("%v", err)
	}
	if fs.NArg() > 0 {
		return cfg, o, usageError("unexpected argument %q: echo takes only flags", fs.Arg(0))
	}
	// The flags whose usage starts "framed:" mean nothing with -proto raw:
	// setting one with raw is a usage error rather than silently ignored.
	var bad []string
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if strings.HasPrefix(f.Usage, "framed:") && cfg.Protocol == netserver.Raw {
			bad = append(bad, fmt.Sprintf("-%s needs -proto framed", f.Name))
		}
	})
	// A setting not given is left zero, netserver's default: it then leaves
	// off a default that could never fire next to the settings given.
	fs.VisitAll(func(f *flag.Flag) {
		if !given[f.Name] && !own[f.Name] && f.DefValue != "" && f.DefValue != "false" {
			_ = f.Value.Set("0")
		}
	})
	if o.pprof && o.metricsAddr == "" {
		bad = append(bad, "-pprof needs -metrics (pprof is served on the metrics address)")
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		bad = append(bad, fmt.Sprintf("-log-format %q: want text or json", o.logFormat))
	}
	if o.metricsAddr != "" {
		if err := setting.CheckAddr("-metrics", o.metricsAddr); err != nil {
			bad = append(bad, err.Error())
		}
	}
	// The grace period is the binary's own setting, under the same rule.
	if err := setting.Check("-shutdown-timeout", o.shutdownTimeout); err != nil {
		bad = append(bad, err.Error())
	}
	o.shutdownTimeout = setting.Or(o.shutdownTimeout, defaultShutdownTimeout)
	if len(bad) > 0 {
		return cfg, o, usageError("%s", strings.Join(bad, "; "))
	}
	return cfg, o, nil
}

// usageError is an error run reports with exit status 2.
func usageError(format string, args ...any) error {
	return fmt.Errorf("echo: "+format+" (run echo -h for help)", args...)
}

// duration is a flag.Value for a duration under the one rule: a Go
// duration (500ms, 30s, 1h), 0 for the default, and off or -1 for Off.
// Another negative duration is taken as given, for netserver to refuse
// with its words. A duration too long for a time.Duration is "out of
// range", not a parse error. Its usage is said to be a duration.
type duration time.Duration

// durationSyntax is what time.ParseDuration accepts, overflow or not.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

func (d *duration) String() string { return time.Duration(*d).String() }

func (d *duration) Set(s string) error {
	if s == "off" || s == "-1" {
		*d = setting.Off
		return nil
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil && durationSyntax.MatchString(s):
		return errors.New("out of range: at most 2562047h")
	case err != nil:
		return errors.New("want a duration such as 500ms, 30s or 1h, 0 or off")
	}
	*d = duration(v)
	return nil
}

// count is a flag.Value for a whole number under the one rule: 0 for the
// default, and off or -1 for Off. Another negative number is taken as
// given, for netserver to refuse with its words.
type count int

func (n *count) String() string { return strconv.Itoa(int(*n)) }

func (n *count) Set(s string) error {
	if s == "off" {
		*n = setting.Off
		return nil
	}
	v, err := strconv.Atoi(s)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return errors.New("out of range")
	case err != nil:
		return errors.New("want a whole number, 0 or off")
	}
	*n = count(v)
	return nil
}
