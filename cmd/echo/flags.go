package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// options are the binary's own settings, outside netserver.Config.
type options struct {
	metricsAddr     string        // "" means no metrics server
	pprof           bool          // serve /debug/pprof/ on metricsAddr
	shutdownTimeout time.Duration // grace period of Shutdown
	logLevel        slog.Level
	logFormat       string // "text" or "json"
	// openFiles is the open-file limit the default -max-conns was derived
	// from (0: unknown, so no default bound); for the startup log.
	openFiles uint64
}

// Defaults of the binary's own flags.
const (
	defaultAddr            = ":9000"
	defaultShutdownTimeout = 10 * time.Second
)

// The timeouts that are on by default, so that no peer can hold a
// connection open forever: a silent one (handshake, idle, keepalive), a
// slowloris (frame) or one that does not read (write stall, and netserver's
// output limits, which are on by default too). Each applies only when its
// flag is not given; an explicit 0 turns it off. safeDefaults applies them.
const (
	// A client of an echo server speaks first: a connection silent this
	// long after it opened is a scanner or a held slot.
	defaultHandshakeTimeout = 10 * time.Second
	// Longer than any pause of a live client; keepalive answers do not
	// count as activity.
	defaultIdleTimeout = 5 * time.Minute
	// Framed: a 64 KiB frame (-max-frame's default) must come at 2 KiB/s
	// or more.
	defaultFrameTimeout = 30 * time.Second
	// No byte of queued output drained for this long: the peer is not
	// reading.
	defaultWriteStallTimeout = 30 * time.Second
	// Every connection closes after about an hour, whatever it does: a
	// raw peer that trickles a byte every few minutes is active by the
	// idle timeout's measure, and one that also does not read leaves its
	// echo in the kernel's socket buffers, where the write-stall timeout
	// and the output limits do not see it; without a bound on age it
	// would hold its place for ever. The jitter spreads the reconnections
	// of connections opened together.
	defaultMaxAge       = time.Hour
	defaultMaxAgeJitter = 6 * time.Minute
	// Framed: a half-open peer (crashed host, cut path) is found about
	// 40 s after it fell silent instead of after the idle timeout.
	defaultKeepaliveTime    = 30 * time.Second
	defaultKeepaliveTimeout = 10 * time.Second
)

// flagDef is one flag as the help shows it.
type flagDef struct {
	name  string
	arg   string // what the value looks like, e.g. DURATION; "" for booleans
	usage string // may hold \n for continuation lines
	// framedOnly, when set, says why the flag means nothing with -proto raw;
	// setting it with raw is a usage error rather than silently ignored.
	framedOnly string
}

// group is a section of the help.
type group struct {
	title string
	note  string // "" or lines shown under the title
	flags []flagDef
}

// flagSet is the binary's flags bound to a Config and options.
type flagSet struct {
	fs     *flag.FlagSet
	groups []group
}

func (s *flagSet) section(title string) { s.groups = append(s.groups, group{title: title}) }

func (s *flagSet) note(text string) { s.groups[len(s.groups)-1].note = text }

func (s *flagSet) add(v flag.Value, d flagDef) {
	s.fs.Var(v, d.name, d.usage)
	g := &s.groups[len(s.groups)-1]
	g.flags = append(g.flags, d)
}

// newFlagSet binds every flag to a field of cfg or o. cfg and o hold the
// defaults on entry, except the safe defaults that depend on other flags
// (safeDefaults) and -max-conns's, which parseFlags derives from openFiles,
// the process's open-file limit (0 = unknown); the help shows them.
func newFlagSet(cfg *netserver.Config, o *options, openFiles uint64) *flagSet {
	s := &flagSet{fs: flag.NewFlagSet("echo", flag.ContinueOnError)}
	s.fs.SetOutput(io.Discard) // parseFlags reports errors and help itself
	s.fs.Usage = func() {}
	t, r, k, l := &cfg.Timeouts, &cfg.Retransmit, &cfg.Kernel, &cfg.Limits
	dur := func(p *time.Duration) flag.Value { return durationValue{p} }
	num := func(p *int) flag.Value { return intValue{p} }
	on := func(d time.Duration) string { return "Default " + shortDur(d) + " (0 = off)" }
	const (
		noRetransmit = "raw has no retransmission"
		noProbe      = "raw has no probe to send; use -tcp-keepalive-idle"
	)

	s.section("Listener")
	s.add(stringValue{&cfg.Addr}, flagDef{name: "addr", arg: "HOST:PORT",
		usage: fmt.Sprintf("address to listen on; port 0 picks a free one\n"+
			"(default %q)", defaultAddr)})
	s.add(choiceValue{
		allowed: []string{"raw", "framed"},
		get:     func() string { return cfg.Protocol.String() },
		set: func(v string) error {
			p, err := netserver.ParseProtocol(v)
			cfg.Protocol = p
			return err
		},
	}, flagDef{name: "proto", arg: "raw|framed",
		usage: "wire protocol: raw echoes a byte stream (nc works);\n" +
			"framed is netwheel's protocol, docs/protocol.md (default raw)"})
	s.add(num(&cfg.EventLoops), flagDef{name: "event-loops", arg: "N",
		usage: "gnet event loops (0 = GOMAXPROCS-1, at least 1). Unless the\n" +
			"GOMAXPROCS variable is set or a CPU quota lowered it, echo runs\n" +
			"GOMAXPROCS one above the cores: 0 is then one loop per core,\n" +
			"with a P to spare so that the timer wheel fires on time (see\n" +
			"netserver.Config.EventLoops)"})
	s.add(boolValue{&cfg.ReusePort}, flagDef{name: "reuse-port",
		usage: "set SO_REUSEPORT so several processes can share -addr"})
	s.add(num(&cfg.MaxConns), flagDef{name: "max-conns", arg: "N",
		usage: fmt.Sprintf("most connections open at once; more are closed on arrival\n"+
			"(0 = no limit). Default: the open-file limit (RLIMIT_NOFILE,\n"+
			"which Go raises to the hard limit at start) less %d and %d per\n"+
			"event loop, so that a full server still has the descriptors to\n"+
			"accept, log and be scraped. %s",
			fdlimit.Reserve, fdlimit.PerLoop, maxConnsHere(openFiles, cfg.EventLoops))})
	s.add(num(&cfg.MaxFrame), flagDef{name: "max-frame", arg: "BYTES",
		usage:      fmt.Sprintf("largest frame accepted (0 = %d KiB)", frame.DefaultMax>>10),
		framedOnly: "raw has no frames"})
	s.add(dur(&cfg.Tick), flagDef{name: "tick", arg: "DURATION",
		usage: fmt.Sprintf("timer wheel resolution, in [%s, %s] (0 = %s); timeouts\n"+
			"fire within a tick or two after they are due",
			shortDur(wheel.MinTick), shortDur(wheel.MaxTick), shortDur(wheel.DefaultTick))})

	s.section("Connection timeouts (0 = off)")
	s.note("Those with a default are on unless set to 0, so that no peer can hold a\n" +
		"connection forever. A default that could never fire, not being below\n" +
		"-read-silence-timeout (keepalive) or the longest -max-age, is left off.")
	s.add(dur(&t.IdleTimeout), flagDef{name: "idle-timeout", arg: "DURATION",
		usage: "close after no data for this long; keepalive answers do not\n" +
			"count as data. " + on(defaultIdleTimeout) + ": longer than a live\n" +
			"client's pauses"})
	s.add(dur(&t.ReadSilenceTimeout), flagDef{name: "read-silence-timeout", arg: "DURATION",
		usage: "close after no inbound byte at all for this long"})
	s.add(dur(&t.KeepaliveTime), flagDef{name: "keepalive-time", arg: "DURATION",
		usage: "framed: send a PING after this long without an inbound\n" +
			"byte; needs -keepalive-timeout. " + on(defaultKeepaliveTime) + ": with\n" +
			"-keepalive-timeout's, finds a half-open peer in about " + shortDur(defaultKeepaliveTime+defaultKeepaliveTimeout) + "\n" +
			"(raw: see -tcp-keepalive-idle)", framedOnly: noProbe})
	s.add(dur(&t.KeepaliveTimeout), flagDef{name: "keepalive-timeout", arg: "DURATION",
		usage: "framed: wait this long for any byte after each PING.\n" +
			"Default " + shortDur(defaultKeepaliveTimeout) + " when -keepalive-time is on", framedOnly: noProbe})
	s.add(num(&t.KeepaliveCount), flagDef{name: "keepalive-count", arg: "N",
		usage: "framed: unanswered PINGs before closing (0 = 1)", framedOnly: noProbe})
	s.add(dur(&t.FrameTimeout), flagDef{name: "frame-timeout", arg: "DURATION",
		usage: "framed: most time from a frame's first byte to its last;\n" +
			"bytes in between do not extend it. " + on(defaultFrameTimeout) + ":\n" +
			"slowloris defence; a 64 KiB frame must come at 2 KiB/s", framedOnly: "raw has no frames"})
	s.add(dur(&t.HandshakeTimeout), flagDef{name: "handshake-timeout", arg: "DURATION",
		usage: "close unless the first frame (framed) or byte (raw) arrives\n" +
			"within this long. " + on(defaultHandshakeTimeout) + ": an echo client\n" +
			"speaks first"})
	s.add(dur(&t.MaxAge), flagDef{name: "max-age", arg: "DURATION",
		usage: "close every connection after this long, whatever it does.\n" +
			on(defaultMaxAge) + ", with -max-age-jitter " + shortDur(defaultMaxAgeJitter) + ", when no\n" +
			"-max-age* flag is given: a peer that trickles a byte now and\n" +
			"then holds no place for ever. Left off when a timeout given\n" +
			"is not below its longest lifetime, " + shortDur(defaultMaxAge+defaultMaxAgeJitter)})
	s.add(dur(&t.MaxAgeJitter), flagDef{name: "max-age-jitter", arg: "DURATION",
		usage: "spread each max age uniformly by +/- this much; must be\n" +
			"below -max-age"})
	s.add(dur(&t.MaxAgeGrace), flagDef{name: "max-age-grace", arg: "DURATION",
		usage: "after max age, let the connection finish for this long\n" +
			"(0 = close at once)"})
	s.add(dur(&t.WriteStallTimeout), flagDef{name: "write-stall-timeout", arg: "DURATION",
		usage: "close when queued output makes no progress (no byte drained\n" +
			"or acknowledged by the peer) for this long; a slow but steady\n" +
			"reader is never cut. " + on(defaultWriteStallTimeout) + ": the peer is not reading"})

	s.section("Per-connection memory limits (on by default; 0 = default, -1 = off)")
	s.add(signedIntValue{&l.OutputHard}, flagDef{name: "output-hard", arg: "BYTES",
		usage: "close a connection at once when its queued output (written,\n" +
			"not yet taken by the kernel) would pass this, so that a peer\n" +
			"that does not read cannot grow the server's memory\n" +
			"(0 = " + sizeText(netserver.DefaultOutputHard) + ")"})
	s.add(signedIntValue{&l.OutputSoft}, flagDef{name: "output-soft", arg: "BYTES",
		usage: "close a connection whose queued output stays above this for\n" +
			"-output-soft-for; a burst that drains in time is allowed\n" +
			"(0 = " + sizeText(netserver.DefaultOutputSoft) + ")"})
	s.add(signedDurationValue{&l.OutputSoftFor}, flagDef{name: "output-soft-for", arg: "DURATION",
		usage: "how long queued output may stay above -output-soft\n" +
			fmt.Sprintf("(0 = %s; -1 turns the soft limit off, as -output-soft -1 does)", shortDur(netserver.DefaultOutputSoftFor))})
	s.add(signedIntValue{&l.UnackedBytes}, flagDef{name: "unacked-bytes", arg: "BYTES",
		usage: "framed: most DATA payload sent and not yet acknowledged, kept\n" +
			"for retransmission; beyond it the connection is closed\n" +
			"(0 = " + sizeText(netserver.DefaultUnackedBytes) + ")", framedOnly: "raw has no acknowledgements"})
	s.add(signedIntValue{&l.PingsPerSecond}, flagDef{name: "pings-per-second", arg: "N",
		usage: "framed: PINGs a peer may send per second (a second's worth at\n" +
			"once); one more closes it, so a ping flood cannot take the\n" +
			fmt.Sprintf("loop's time from others (0 = %d)", netserver.DefaultPingsPerSecond), framedOnly: "raw has no PING"})

	s.section("Retransmission (framed only; 0 = default)")
	s.add(dur(&r.InitialRTO), flagDef{name: "initial-rto", arg: "DURATION",
		usage: fmt.Sprintf("RTO before the first RTT sample (0 = %v)", retransmit.DefaultInitialRTO), framedOnly: noRetransmit})
	s.add(dur(&r.MinRTO), flagDef{name: "min-rto", arg: "DURATION",
		usage: fmt.Sprintf("RTO floor (0 = %v)", retransmit.DefaultMinRTO), framedOnly: noRetransmit})
	s.add(dur(&r.MaxRTO), flagDef{name: "max-rto", arg: "DURATION",
		usage: fmt.Sprintf("RTO cap, backoff included; at least -min-rto (0 = %s)", shortDur(retransmit.DefaultMaxRTO)), framedOnly: noRetransmit})
	s.add(dur(&r.Granularity), flagDef{name: "rto-granularity", arg: "DURATION",
		usage: "clock granularity G of RFC 6298: the variance term's floor\n" +
			"(0 = -tick)", framedOnly: noRetransmit})
	s.add(choiceValue{
		allowed: []string{"rfc6298", "linux"},
		get:     func() string { return r.Variant.String() },
		set: func(v string) error {
			switch v {
			case "rfc6298":
				r.Variant = retransmit.RFC6298
			case "linux":
				r.Variant = retransmit.Linux
			default:
				return errors.New("bad variant")
			}
			return nil
		},
	}, flagDef{name: "rto-variant", arg: "rfc6298|linux",
		usage: "rfc6298 clamps the RTO to at least -min-rto; linux\n" +
			"floors the variance term at -min-rto, as Linux TCP does\n" +
			"(default rfc6298)", framedOnly: noRetransmit})
	s.add(num(&r.MaxRetransmits), flagDef{name: "max-retransmits", arg: "N",
		usage: fmt.Sprintf("retransmissions of one message before giving up (0 = %d)", retransmit.DefaultMaxRetransmits), framedOnly: noRetransmit})
	s.add(dur(&r.GiveUpAfter), flagDef{name: "give-up-after", arg: "DURATION",
		usage: fmt.Sprintf("give up on a message unacknowledged this long (0 = %v)", retransmit.DefaultGiveUpAfter), framedOnly: noRetransmit})
	s.add(num(&r.Window), flagDef{name: "window", arg: "N",
		usage: fmt.Sprintf("most unacknowledged messages per connection, at most\n"+
			"%d (0 = %d)",
			retransmit.MaxWindow, retransmit.DefaultWindow), framedOnly: noRetransmit})

	s.section("Kernel TCP backstops (Linux; 0 = not set, see each)")
	s.add(dur(&k.KeepaliveIdle), flagDef{name: "tcp-keepalive-idle", arg: "DURATION",
		usage: "enable TCP keepalive after this long idle (TCP_KEEPIDLE;\n" +
			"0 = keepalive as the system has it, off for new sockets)"})
	s.add(dur(&k.KeepaliveInterval), flagDef{name: "tcp-keepalive-interval", arg: "DURATION",
		usage: "time between TCP keepalive probes (TCP_KEEPINTVL); needs\n" +
			"-tcp-keepalive-idle (0 = -tcp-keepalive-idle/5, as gnet sets it)"})
	s.add(num(&k.KeepaliveCount), flagDef{name: "tcp-keepalive-count", arg: "N",
		usage: "unanswered TCP keepalive probes before the kernel drops the\n" +
			"connection (TCP_KEEPCNT); needs -tcp-keepalive-idle (0 = 5)"})
	s.add(dur(&k.UserTimeout), flagDef{name: "tcp-user-timeout", arg: "DURATION",
		usage: "drop the connection when sent data stays unacknowledged\n" +
			"this long (TCP_USER_TIMEOUT; 0 = the system's retries)"})

	s.section("Shutdown (on SIGINT or SIGTERM; a second signal kills at once)")
	s.add(durationValue{&o.shutdownTimeout}, flagDef{name: "shutdown-timeout", arg: "DURATION",
		usage: fmt.Sprintf("grace period for busy connections before they are cut;\n"+
			"idle ones close at once (0 = no grace; default %s)", shortDur(defaultShutdownTimeout))})
	s.add(boolValue{&cfg.SilentShutdown}, flagDef{name: "silent-shutdown",
		usage: "framed: close without sending peers a CLOSE frame first", framedOnly: "raw has no CLOSE frame"})

	s.section("Observability")
	s.add(stringValue{&o.metricsAddr}, flagDef{name: "metrics", arg: "HOST:PORT",
		usage: "serve /metrics (Prometheus) on this address, and\n" +
			"/debug/pprof/ with -pprof; keep it private (default off)"})
	s.add(boolValue{&o.pprof}, flagDef{name: "pprof",
		usage: "also serve /debug/pprof/ on -metrics (default off: profiles\n" +
			"show the program's internals and cost CPU while taken)"})
	s.add(choiceValue{
		allowed: []string{"debug", "info", "warn", "error"},
		get:     func() string { return strings.ToLower(o.logLevel.String()) },
		set: func(v string) error {
			return o.logLevel.UnmarshalText([]byte(v))
		},
	}, flagDef{name: "log-level", arg: "LEVEL",
		usage: "least severe level logged: debug, info, warn or error\n" +
			"(default info)"})
	s.add(choiceValue{
		allowed: []string{"text", "json"},
		get:     func() string { return o.logFormat },
		set:     func(v string) error { o.logFormat = v; return nil },
	}, flagDef{name: "log-format", arg: "text|json",
		usage: "log line format, to stderr (default text)"})
	return s
}

// shortDur formats d like time.Duration.String without the zero units
// that follow a nonzero one: 1h, not 1h0m0s.
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// usage writes the help text.
func (s *flagSet) usage(w io.Writer) {
	fmt.Fprint(w, `Usage: echo [flags]

echo is netwheel's echo server: every byte (raw) or DATA frame (framed) it
receives is sent back, and every connection gets the timeouts below from one
timing wheel. Expired connections are closed and counted by reason, and
logged (idle and max-age closes at debug level, being routine).
With no flags, no peer can hold a connection open forever: the handshake,
idle, write-stall and (framed) frame and keepalive timeouts, the output
limits and -max-conns are on by default.

Durations are Go durations: 500ms, 30s, 1m30s, 2h. Sizes are in bytes.
Exit status: 0 after a clean shutdown, 1 on a runtime error or when the
shutdown had to cut busy connections, 2 on a usage error.
`)
	for _, g := range s.groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		if g.note != "" {
			for _, l := range strings.Split(g.note, "\n") {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
		for _, d := range g.flags {
			head := "-" + d.name
			if d.arg != "" {
				head += " " + d.arg
			}
			lines := strings.Split(d.usage, "\n")
			if len(head) > 27 {
				fmt.Fprintf(w, "  %s\n", head)
				head = ""
			}
			for i, l := range lines {
				if i > 0 {
					head = ""
				}
				fmt.Fprintf(w, "  %-28s %s\n", head, l)
			}
		}
	}
}

// parseFlags parses args into a netserver.Config and the binary's options,
// with the safe defaults (safeDefaults) for the flags not given and
// -max-conns derived from the process's open-file limit. On -h or -help it
// writes the help to help and returns flag.ErrHelp. Every other error is a
// usage error (run exits with status 2) that says what is wrong and what is
// allowed. The Config's Logger is left nil: run builds it from the options.
func parseFlags(args []string, help io.Writer) (netserver.Config, options, error) {
	return parseFlagsLimit(args, help, fdlimit.OpenFiles())
}

// parseFlagsLimit is parseFlags under an open-file limit of openFiles
// (0 = unknown).
func parseFlagsLimit(args []string, help io.Writer, openFiles uint64) (netserver.Config, options, error) {
	cfg := netserver.Config{Addr: defaultAddr}
	o := options{shutdownTimeout: defaultShutdownTimeout, logLevel: slog.LevelInfo, logFormat: "text", openFiles: openFiles}
	s := newFlagSet(&cfg, &o, openFiles)
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			s.usage(help)
			return netserver.Config{}, options{}, err
		}
		return netserver.Config{}, options{}, fmt.Errorf("echo: %v (run echo -h for help)", err)
	}
	if s.fs.NArg() > 0 {
		return netserver.Config{}, options{}, fmt.Errorf("echo: unexpected argument %q: echo takes only flags (run echo -h for help)",
			s.fs.Arg(0))
	}
	given := givenFlags(s.fs)
	var bad []string
	if cfg.Protocol == netserver.Raw {
		for _, g := range s.groups {
			for _, d := range g.flags {
				if d.framedOnly != "" && given[d.name] {
					bad = append(bad, fmt.Sprintf("-%s needs -proto framed (%s)", d.name, d.framedOnly))
				}
			}
		}
	}
	if o.pprof && o.metricsAddr == "" {
		bad = append(bad, "-pprof needs -metrics (pprof is served on the metrics address)")
	}
	if len(bad) > 0 {
		return netserver.Config{}, options{}, fmt.Errorf("echo: %s (run echo -h for help)", strings.Join(bad, "; "))
	}
	safeDefaults(&cfg, given)
	switch {
	case !given["max-conns"]:
		cfg.MaxConns = fdlimit.MaxConns(openFiles, eventLoops(cfg.EventLoops))
	case cfg.MaxConns == 0:
		cfg.MaxConns = -1 // no limit, where netserver's 0 would derive one
	}
	return cfg, o, nil
}

// givenFlags returns the names of the flags set on the command line, even
// to their zero value.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// safeDefaults turns on the default timeouts (default* above) in cfg for
// each flag not given. The framed-only ones (frame, keepalive) apply only to
// Framed. A default that could never fire next to the flags given is left
// off, so that it does not make their combination invalid: the keepalive
// time when it is not below ReadSilenceTimeout (the read-silence timeout
// then finds a dead peer first), and any timeout not below the longest
// lifetime MaxAge+MaxAgeJitter+MaxAgeGrace (max age closes first). The
// keepalive timeout's default applies only when the keepalive time is set.
// The max age's default, with its jitter, applies when none of the three
// max-age flags is given, and is left off when a timeout is not below its
// longest lifetime (which the timeout, given, then says is wanted).
func safeDefaults(cfg *netserver.Config, given map[string]bool) {
	t := &cfg.Timeouts
	fits := func(d time.Duration) bool {
		if t.MaxAge == 0 {
			return true
		}
		return d < satAdd(satAdd(t.MaxAge, t.MaxAgeJitter), t.MaxAgeGrace)
	}
	def := func(name string, p *time.Duration, d time.Duration) {
		if !given[name] && fits(d) {
			*p = d
		}
	}
	def("handshake-timeout", &t.HandshakeTimeout, defaultHandshakeTimeout)
	def("idle-timeout", &t.IdleTimeout, defaultIdleTimeout)
	def("write-stall-timeout", &t.WriteStallTimeout, defaultWriteStallTimeout)
	if cfg.Protocol == netserver.Framed {
		def("frame-timeout", &t.FrameTimeout, defaultFrameTimeout)
		if t.ReadSilenceTimeout == 0 || defaultKeepaliveTime < t.ReadSilenceTimeout {
			def("keepalive-time", &t.KeepaliveTime, defaultKeepaliveTime)
		}
		if t.KeepaliveTime != 0 && !given["keepalive-timeout"] {
			t.KeepaliveTimeout = defaultKeepaliveTimeout
		}
	}
	if !given["max-age"] && !given["max-age-jitter"] && !given["max-age-grace"] {
		t.MaxAge, t.MaxAgeJitter = defaultMaxAge, defaultMaxAgeJitter
		if errors.Is(t.Validate(), idle.ErrNoEffect) {
			t.MaxAge, t.MaxAgeJitter = 0, 0 // a timeout given is as long
		}
	}
}

// satAdd adds two non-negative durations, saturating instead of
// overflowing, as idle.Config.Validate does.
func satAdd(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// fieldFlags maps the Config field names that netserver's, idle's and
// retransmit's validation errors mention to the flags that set them.
// Kernel's fields are also named unqualified where that is unambiguous.
var fieldFlags = map[string]string{
	"Addr":                           "-addr",
	"EventLoops":                     "-event-loops",
	"Tick":                           "-tick",
	"MaxConns":                       "-max-conns",
	"MaxFrame":                       "-max-frame",
	"IdleTimeout":                    "-idle-timeout",
	"ReadSilenceTimeout":             "-read-silence-timeout",
	"KeepaliveTime":                  "-keepalive-time",
	"KeepaliveTimeout":               "-keepalive-timeout",
	"KeepaliveCount":                 "-keepalive-count",
	"FrameTimeout":                   "-frame-timeout",
	"HandshakeTimeout":               "-handshake-timeout",
	"MaxAge":                         "-max-age",
	"MaxAgeJitter":                   "-max-age-jitter",
	"MaxAgeGrace":                    "-max-age-grace",
	"WriteStallTimeout":              "-write-stall-timeout",
	"InitialRTO":                     "-initial-rto",
	"MinRTO":                         "-min-rto",
	"MaxRTO":                         "-max-rto",
	"Granularity":                    "-rto-granularity",
	"MaxRetransmits":                 "-max-retransmits",
	"GiveUpAfter":                    "-give-up-after",
	"Window":                         "-window",
	"KeepaliveIdle":                  "-tcp-keepalive-idle",
	"KeepaliveInterval":              "-tcp-keepalive-interval",
	"UserTimeout":                    "-tcp-user-timeout",
	"Kernel.KeepaliveIdle":           "-tcp-keepalive-idle",
	"Kernel.KeepaliveInterval":       "-tcp-keepalive-interval",
	"Kernel.KeepaliveCount":          "-tcp-keepalive-count",
	"Kernel.UserTimeout":             "-tcp-user-timeout",
	"Kernel.KeepaliveInterval/Count": "-tcp-keepalive-interval/-tcp-keepalive-count",
	"OutputHard":                     "-output-hard",
	"OutputSoft":                     "-output-soft",
	"OutputSoftFor":                  "-output-soft-for",
	"UnackedBytes":                   "-unacked-bytes",
	"Limits.OutputHard":              "-output-hard",
	"Limits.OutputSoft":              "-output-soft",
	"Limits.OutputSoftFor":           "-output-soft-for",
	"Limits.UnackedBytes":            "-unacked-bytes",
	"PingsPerSecond":                 "-pings-per-second",
	"Limits.PingsPerSecond":          "-pings-per-second",
}

var fieldRE = regexp.MustCompile(`Kernel\.KeepaliveInterval/Count|(?:Timeouts\.|Kernel\.|Limits\.)?\b[A-Z][A-Za-z]+\b`)

// flagNames rewrites the Config field names in a validation message into
// the flags that set them, so that the user reads about flags.
func flagNames(msg string) string {
	return fieldRE.ReplaceAllStringFunc(msg, func(m string) string {
		if f, ok := fieldFlags[m]; ok {
			return f
		}
		if f, ok := fieldFlags[strings.TrimPrefix(m, "Timeouts.")]; ok {
			return f
		}
		return m
	})
}

// Flag values. Each Set error says what is allowed; the flag package
// prefixes it with the flag's name and the rejected value.

type durationValue struct{ p *time.Duration }

func (v durationValue) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration with a unit, such as 500ms, 30s or 1m30s, or 0")
	}
	if d < 0 {
		return errors.New("want a duration of 0 or more")
	}
	*v.p = d
	return nil
}

// signedDurationValue is a duration that may be negative (off, for a
// Limits field); a bare -1 is taken as -1ns.
type signedDurationValue struct{ p *time.Duration }

func (v signedDurationValue) String() string { return durationValue(v).String() }

func (v signedDurationValue) Set(s string) error {
	if s == "-1" {
		*v.p = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration with a unit, such as 500ms, 30s or 1m30s, 0 or -1")
	}
	*v.p = d
	return nil
}

type intValue struct{ p *int }

func (v intValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a whole number, 0 or more")
	}
	*v.p = n
	return nil
}

// signedIntValue is a whole number that may be negative (off, for a
// Limits field).
type signedIntValue struct{ p *int }

func (v signedIntValue) String() string { return intValue(v).String() }

func (v signedIntValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number: 0 for the default, -1 for off")
	}
	*v.p = n
	return nil
}

type boolValue struct{ p *bool }

func (v boolValue) IsBoolFlag() bool { return true }

func (v boolValue) String() string { return strconv.FormatBool(v.p != nil && *v.p) }

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}

type stringValue struct{ p *string }

func (v stringValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v stringValue) Set(s string) error { *v.p = s; return nil }

// choiceValue accepts one of allowed, exactly as written.
type choiceValue struct {
	allowed []string
	get     func() string
	set     func(string) error
}

func (v choiceValue) String() string {
	if v.get == nil {
		return ""
	}
	return v.get()
}

func (v choiceValue) Set(s string) error {
	for _, a := range v.allowed {
		if s == a {
			return v.set(s)
		}
	}
	last := len(v.allowed) - 1
	return fmt.Errorf("want %s or %s", strings.Join(v.allowed[:last], ", "), v.allowed[last])
}
