package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/frame"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// options are the binary's own settings, outside netserver.Config.
type options struct {
	metricsAddr     string        // "" means no metrics server
	shutdownTimeout time.Duration // grace period of Shutdown
	logLevel        slog.Level
	logFormat       string // "text" or "json"
}

// Defaults of the binary's own flags. Every netserver setting defaults to
// its zero value, whose meaning netserver documents (mostly "off").
const (
	defaultAddr            = ":9000"
	defaultShutdownTimeout = 10 * time.Second
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
	flags []flagDef
}

// flagSet is the binary's flags bound to a Config and options.
type flagSet struct {
	fs     *flag.FlagSet
	groups []group
}

func (s *flagSet) section(title string) { s.groups = append(s.groups, group{title: title}) }

func (s *flagSet) add(v flag.Value, d flagDef) {
	s.fs.Var(v, d.name, d.usage)
	g := &s.groups[len(s.groups)-1]
	g.flags = append(g.flags, d)
}

// newFlagSet binds every flag to a field of cfg or o. cfg and o hold the
// defaults on entry.
func newFlagSet(cfg *netserver.Config, o *options) *flagSet {
	s := &flagSet{fs: flag.NewFlagSet("echo", flag.ContinueOnError)}
	s.fs.SetOutput(io.Discard) // parseFlags reports errors and help itself
	s.fs.Usage = func() {}
	t, r, k := &cfg.Timeouts, &cfg.Retransmit, &cfg.Kernel
	dur := func(p *time.Duration) flag.Value { return durationValue{p} }
	num := func(p *int) flag.Value { return intValue{p} }
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
		usage: "gnet event loops (0 = GOMAXPROCS-1, at least 1); with a P to spare\n" +
			"the timer wheel fires on time (see netserver.Config.EventLoops)"})
	s.add(boolValue{&cfg.ReusePort}, flagDef{name: "reuse-port",
		usage: "set SO_REUSEPORT so several processes can share -addr"})
	s.add(num(&cfg.MaxConns), flagDef{name: "max-conns", arg: "N",
		usage: "most connections open at once; more are closed on arrival\n" +
			"(0 = no limit)"})
	s.add(num(&cfg.MaxFrame), flagDef{name: "max-frame", arg: "BYTES",
		usage:      fmt.Sprintf("largest frame accepted (0 = %d KiB)", frame.DefaultMax>>10),
		framedOnly: "raw has no frames"})
	s.add(dur(&cfg.Tick), flagDef{name: "tick", arg: "DURATION",
		usage: fmt.Sprintf("timer wheel resolution, in [%s, %s] (0 = %s); timeouts\n"+
			"fire within a tick or two after they are due",
			shortDur(wheel.MinTick), shortDur(wheel.MaxTick), shortDur(wheel.DefaultTick))})

	s.section("Connection timeouts (0 = off)")
	s.add(dur(&t.IdleTimeout), flagDef{name: "idle-timeout", arg: "DURATION",
		usage: "close after no data for this long (keepalive answers do not\n" +
			"count as data)"})
	s.add(dur(&t.ReadSilenceTimeout), flagDef{name: "read-silence-timeout", arg: "DURATION",
		usage: "close after no inbound byte at all for this long"})
	s.add(dur(&t.KeepaliveTime), flagDef{name: "keepalive-time", arg: "DURATION",
		usage: "framed: send a PING after this long without an inbound\n" +
			"byte; needs -keepalive-timeout (raw: see -tcp-keepalive-idle)", framedOnly: noProbe})
	s.add(dur(&t.KeepaliveTimeout), flagDef{name: "keepalive-timeout", arg: "DURATION",
		usage: "framed: wait this long for any byte after each PING", framedOnly: noProbe})
	s.add(num(&t.KeepaliveCount), flagDef{name: "keepalive-count", arg: "N",
		usage: "framed: unanswered PINGs before closing (0 = 1)", framedOnly: noProbe})
	s.add(dur(&t.FrameTimeout), flagDef{name: "frame-timeout", arg: "DURATION",
		usage: "framed: most time from a frame's first byte to its last\n" +
			"(slowloris defence: bytes in between do not extend it)", framedOnly: "raw has no frames"})
	s.add(dur(&t.HandshakeTimeout), flagDef{name: "handshake-timeout", arg: "DURATION",
		usage: "close unless the first frame (framed) or byte (raw) arrives\n" +
			"within this long"})
	s.add(dur(&t.MaxAge), flagDef{name: "max-age", arg: "DURATION",
		usage: "close every connection after this long, whatever it does"})
	s.add(dur(&t.MaxAgeJitter), flagDef{name: "max-age-jitter", arg: "DURATION",
		usage: "spread each max age uniformly by +/- this much; must be\n" +
			"below -max-age"})
	s.add(dur(&t.MaxAgeGrace), flagDef{name: "max-age-grace", arg: "DURATION",
		usage: "after max age, let the connection finish for this long\n" +
			"(0 = close at once)"})
	s.add(dur(&t.WriteStallTimeout), flagDef{name: "write-stall-timeout", arg: "DURATION",
		usage: "close when output stays queued (the peer does not read)\n" +
			"this long"})

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

	s.section("Kernel TCP backstops (Linux; 0 = system default)")
	s.add(dur(&k.KeepaliveIdle), flagDef{name: "tcp-keepalive-idle", arg: "DURATION",
		usage: "enable TCP keepalive after this long idle (TCP_KEEPIDLE)"})
	s.add(dur(&k.KeepaliveInterval), flagDef{name: "tcp-keepalive-interval", arg: "DURATION",
		usage: "time between TCP keepalive probes (TCP_KEEPINTVL); needs\n" +
			"-tcp-keepalive-idle"})
	s.add(num(&k.KeepaliveCount), flagDef{name: "tcp-keepalive-count", arg: "N",
		usage: "unanswered TCP keepalive probes before the kernel drops the\n" +
			"connection (TCP_KEEPCNT); needs -tcp-keepalive-idle"})
	s.add(dur(&k.UserTimeout), flagDef{name: "tcp-user-timeout", arg: "DURATION",
		usage: "drop the connection when sent data stays unacknowledged\n" +
			"this long (TCP_USER_TIMEOUT)"})

	s.section("Shutdown (on SIGINT or SIGTERM; a second signal kills at once)")
	s.add(durationValue{&o.shutdownTimeout}, flagDef{name: "shutdown-timeout", arg: "DURATION",
		usage: fmt.Sprintf("grace period for busy connections before they are cut;\n"+
			"idle ones close at once (0 = no grace; default %s)", shortDur(defaultShutdownTimeout))})
	s.add(boolValue{&cfg.SilentShutdown}, flagDef{name: "silent-shutdown",
		usage: "framed: close without sending peers a CLOSE frame first", framedOnly: "raw has no CLOSE frame"})

	s.section("Observability")
	s.add(stringValue{&o.metricsAddr}, flagDef{name: "metrics", arg: "HOST:PORT",
		usage: "serve /metrics (Prometheus) and /debug/pprof/ on this\n" +
			"address; keep it private (default off)"})
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
timing wheel. Expired connections are closed, logged and counted by reason.

Durations are Go durations: 500ms, 30s, 1m30s, 2h. Sizes are in bytes.
Exit status: 0 after a clean shutdown, 1 on a runtime error or when the
shutdown had to cut busy connections, 2 on a usage error.
`)
	for _, g := range s.groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
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

// parseFlags parses args into a netserver.Config and the binary's options.
// On -h or -help it writes the help to help and returns flag.ErrHelp. Every
// other error is a usage error (run exits with status 2) that says what is
// wrong and what is allowed.
// The Config's Logger is left nil: run builds it from the options.
func parseFlags(args []string, help io.Writer) (netserver.Config, options, error) {
	cfg := netserver.Config{Addr: defaultAddr}
	o := options{shutdownTimeout: defaultShutdownTimeout, logLevel: slog.LevelInfo, logFormat: "text"}
	s := newFlagSet(&cfg, &o)
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
	if cfg.Protocol == netserver.Raw {
		var bad []string
		for _, g := range s.groups {
			for _, d := range g.flags {
				if d.framedOnly != "" && isSet(s.fs, d.name) {
					bad = append(bad, fmt.Sprintf("-%s needs -proto framed (%s)", d.name, d.framedOnly))
				}
			}
		}
		if len(bad) > 0 {
			return netserver.Config{}, options{}, fmt.Errorf("echo: %s (run echo -h for help)", strings.Join(bad, "; "))
		}
	}
	return cfg, o, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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
}

var fieldRE = regexp.MustCompile(`Kernel\.KeepaliveInterval/Count|(?:Timeouts\.|Kernel\.)?\b[A-Z][A-Za-z]+\b`)

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
