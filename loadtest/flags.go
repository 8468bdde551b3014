package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/observe"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/loadtest/internal/shard"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// errUsage is wrapped by every flag validation error.
var errUsage = errors.New("loadtest: bad flags")

// options is the parsed and validated command line.
type options struct {
	// The attack's settings the flags give (Addr "": the embedded
	// server); run adds the plan's share of the connections.
	attack.Config
	known    *report.Timeouts // -addr: the timeouts the flags gave (the others zero); nil embedded
	conns    int
	fins     bool // -fins: capture the server's FINs on the loopback
	shard    shard.Shard
	jsonPath string
	plotPath string
	quiet    bool
	version  bool // -version: print the version and exit
	maxConns int  // the server's connection limit (0: none)
	// maxConnsPerSource is the server's per-source limit (0: none known;
	// the embedded server: none).
	maxConnsPerSource int
	cpuProf           string
	metrics           string // -addr: the server's Prometheus endpoint for the leak check ("": none)
	metricsNS         string // the prefix of the server's own metrics there (netserver's Config.MetricsNamespace)

	// Hostile scenarios: connections per scenario (by its name), and the
	// server's limits its memory growth is judged against.
	hostileConns map[string]*int
	bound        report.MemoryBound // -output-limit, -unacked-limit and -mem-allowance; For sizes it for the run
	serverPID    int                // -addr: the server's pid, for its RSS (0: none)

	notes []string
}

// defaultHorizon is -close-horizon's default: long enough to measure a
// server that sweeps its idle clients every few seconds (Redis is 1-4 s
// late), short enough that a server that never closes costs the run 10 s.
const defaultHorizon = 10 * time.Second

// defaultSpread is -idle-spread's default; it is capped at a quarter of
// the idle timeout unless given explicitly.
const defaultSpread = time.Second

// quietBounds returns the barrier bound and the spread window for the
// quiet connections: the barrier waits at most 10 s (the connections send
// a keep-alive every third of the idle timeout while they wait, since the
// server's idle timer runs from the open), and with an idle timeout the
// window is at most a quarter of it unless given.
func quietBounds(idle, spread time.Duration, spreadSet bool) (barrier, window time.Duration) {
	barrier, window = 10*time.Second, spread
	if idle > 0 && !spreadSet {
		window = min(window, idle/4)
	}
	return barrier, window
}

// parseFlags parses the run command's flags; out receives -h's text.
func parseFlags(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(out)
	var proto, scen, shardFlag, payload, expect, preset, proxyVersion, proxyClients string
	t := &o.Timeouts
	fs.StringVar(&o.Addr, "addr", "", "drive an external server at `HOST:PORT` instead of the embedded one (its timeouts are then described by the timeout flags)")
	fs.StringVar(&proto, "proto", "", "client protocol: raw or framed (default framed for the embedded server, raw with -addr)")
	fs.StringVar(&scen, "scenario", "all", "comma-separated scenarios run at once (listed above), or all: every one that applies to the server\n"+
		"(framed-only ones need -proto framed; connflood needs -max-conns, handshake -handshake; slowloris over raw -frame-timeout with -addr)")
	fs.IntVar(&o.conns, "conns", 400, "connections per polite scenario (keepalive: half survive, half silent)")
	fs.Float64Var(&o.Rate, "rate", 20, "echo: messages/s per connection, open loop")
	fs.IntVar(&o.Size, "size", 64, "message payload `bytes`")
	fs.StringVar(&payload, "payload", "", "raw: the `bytes` of each message, Go escapes allowed (PING\\r\\n) (default: -size bytes of a letter pattern, for an echo server)")
	fs.StringVar(&expect, "expect", "", "raw, with -addr: what an answer to each message must be: `echo` (the message itself, the default); any (any bytes); none (the server answers nothing);\n"+
		"or the bytes it begins with, Go escapes allowed: a line (through its \\n) beginning so, or an HTTP/1.x response (a prefix beginning HTTP/, its body by Content-Length or chunked)")
	fs.StringVar(&preset, "preset", "", "raw, with -addr: -payload and -expect for a common protocol (either flag, given, overrides its half):\n"+
		"redis (PING / +PONG), memcached (version / VERSION), http (a keep-alive GET / / HTTP/1.), line (a line / any line)")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "echo and churn sending time; the run lasts until the timer scenarios finish too")
	fs.BoolVar(&o.Closed, "closed", false, "echo: closed loop (each connection sends when its previous echo arrived) instead of open loop")
	fs.Float64Var(&o.ChurnRate, "churn-rate", 100, "churn: connections opened (and closed) per second")
	timeoutFlags(fs, t)
	fs.DurationVar(&t.Slack, "slack", 500*time.Millisecond, "how late after its deadline a close still counts as on time")
	fs.DurationVar(&o.CloseHorizon, "close-horizon", defaultHorizon, "how long after its deadline a close is still waited for, and its lateness measured; later counts as never\n"+
		"(a close on time ends the wait at once: only a late server makes the run longer)")
	fs.StringVar(&shardFlag, "shard", "1/1", "run shard `i/n` of the connections (merge the -json files with `loadtest report`);\n"+
		"auto: shard $JOB_COMPLETION_INDEX+1 of $LOADTEST_SHARDS (a Kubernetes Indexed Job; see docs/scaling.md)")
	fs.StringVar(&o.jsonPath, "json", "", "write the full result to `FILE`")
	fs.StringVar(&o.plotPath, "plot", "", "draw latency and close-error distributions to `FILE.svg` or FILE.html")
	fs.BoolVar(&o.quiet, "q", false, "no progress line")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.fins, "fins", false, "capture the server's FINs on the loopback interface and report the close error from their kernel timestamps too,\n"+
		"which leaves out this client's delay to read the close (Linux; needs CAP_NET_RAW, else a note says it was not done)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "the server's connection limit (0: none): the embedded netwheel server's MaxConns, or what -addr's server enforces; connflood needs it")
	o.hostileConns = map[string]*int{
		scenario.Nonreader: fs.Int("nonreader-conns", 4, "nonreader: connections that send echo traffic as fast as the server takes it and never read"),
		scenario.Splitter:  fs.Int("splitter-conns", 20, "splitter: connections whose messages (at -rate, -size) are written cut at random byte boundaries and checked byte for byte"),
		scenario.Pingflood: fs.Int("pingflood-conns", 4, "pingflood: connections that send PINGs as fast as the server takes them (half read the PONGs, half never read)"),
		scenario.Garbage:   fs.Int("garbage-conns", 3, "garbage: connections that send random bytes (framed: in turn random, an unknown frame type, a 0xFFFFFFF0 length prefix)"),
		scenario.Connflood: fs.Int("flood-conns", 0, "connflood: connections opened at once after the other scenarios, and held (default -max-conns + 200)"),
		scenario.Sourceflood: fs.Int("sourceflood-conns", 0, "sourceflood: connections the flooding source opens at once and holds (default -max-conns-per-source + 200);\n"+
			"-conns other sources connect meanwhile"),
	}
	fs.StringVar(&proxyVersion, "proxy", "", "the PROXY protocol `version`, v1 or v2: start every connection with a PROXY protocol header naming a client of its own from\n"+
		"-proxy-clients, as a balancer would (the server must require the PROXY protocol from this host)")
	// The block set aside for benchmarks (RFC 2544), which no real client has.
	fs.StringVar(&proxyClients, "proxy-clients", "198.18.0.0/15", "the `prefix` -proxy's clients come from: an IPv4 address each, or an IPv6 /64 each; the first is\n"+
		"sourceflood's flooding source")
	fs.IntVar(&o.maxConnsPerSource, "max-conns-per-source", 0, "the server's per-source connection limit (0: none): the embedded netwheel server's MaxConnsPerSource,\n"+
		"or what -addr's server enforces; sourceflood needs it")
	o.HostileBytes, o.bound = attack.DefaultHostileBytes, report.MemoryBound{OutputLimit: netserver.DefaultOutputHard, UnackedLimit: netserver.DefaultUnackedBytes, Fixed: 32 << 20}
	fs.Var((*report.ByteSize)(&o.HostileBytes), "hostile-bytes", "most `bytes` one nonreader or ping flooder sends (K, M, G suffixes: KiB, MiB, GiB); then it only trickles. "+
		"nonreader is judged only above -output-limit plus 8 MiB of kernel buffers (framed: or above -unacked-limit)")
	fs.Var((*report.ByteSize)(&o.bound.OutputLimit), "output-limit", "the server's hard limit of queued output per connection, in `bytes`, for the memory bound (embedded netwheel: its Limits.OutputHard)")
	fs.Var((*report.ByteSize)(&o.bound.UnackedLimit), "unacked-limit", "framed: the server's limit of unacknowledged DATA payload per connection, in `bytes`, for the memory bound (embedded netwheel: its Limits.UnackedBytes)")
	fs.Var((*report.ByteSize)(&o.bound.Fixed), "mem-allowance", "with hostile scenarios, the server's memory growth allowed in `bytes` besides the per-connection limits (and 32 KiB per other connection)")
	fs.IntVar(&o.serverPID, "server-pid", 0, "with -addr: the server's `PID` on this host; its RSS (/proc/PID/status) is sampled during hostile scenarios (otherwise -metrics' process_resident_memory_bytes)")
	fs.IntVar(&o.DialConcurrency, "dial-concurrency", 128, "dials in flight at once")
	fs.DurationVar(&o.IdleSpread, "idle-spread", defaultSpread, "idle and keepalive-silent connections first all open (waiting at most 10s, keeping themselves open meanwhile), then send their last message\n"+
		"evenly spread over this window, so sends and expiries do not come in one burst (0: all at once; default capped at a quarter of -idle)")
	fs.StringVar(&o.metrics, "metrics", "", "with -addr: the server's Prometheus endpoint `URL`: http://HOST:PORT/PATH, or HOST:PORT for http://HOST:PORT/metrics;\n"+
		"read before and after the run to check that no connection, timer, open file or goroutine leaked (loopback or -addr's host only)")
	fs.StringVar(&o.metricsNS, "metrics-namespace", observe.DefaultNamespace, "with -metrics: the `prefix` of the server's own metrics (netserver's Config.MetricsNamespace), as in PREFIX_connections_open")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the whole run (client and embedded server) to `FILE`")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadtest [flags]          run a load test (embedded server unless -addr)\n"+
			"       loadtest report [-json OUT] [-plot OUT] FILE...   re-render or merge results\n"+
			"\nThe embedded server is netwheel's (netserver's echo). The baseline servers (gnet, gnetafterfunc,\n"+
			"netdeadline, nbio) and the comparison of netwheel with them (docs/perf.md's table) are in the bench\n"+
			"module: cd bench && go run ./compare -h\n\n"+
			"Flags and numbers: the timeout flags (-idle, -keepalive, -frame-timeout, -handshake, -rto...) describe the\n"+
			"server under test, not a setting of the harness: 0 means the server has no such timeout, and a negative\n"+
			"value is an error. (cmd/echo's flags configure a server: there 0 is the library's default and -1 off.)\n"+
			"Counts, rates and sizes must be positive (-max-conns 0: no limit known). Durations are Go durations (500ms, 3s), at most 1h.\n"+
			"Scenarios (-scenario all, the default, runs those that apply):\n%s\nflags:\n", scenarioHelp())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q (did you mean `loadtest report`?)", errUsage, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if o.Addr != "" {
		if _, _, err := net.SplitHostPort(o.Addr); err != nil {
			return nil, fmt.Errorf("%w: -addr %q: want HOST:PORT", errUsage, o.Addr)
		}
		o.known = knownTimeouts(fs, t.Slack)
	}
	for _, check := range []func() error{ // in order: each may read what the ones before set
		func() error { return parseProto(o, proto, set) },
		func() error { return parseExchange(o, payload, expect, preset, set) },
		func() error { return checkNumbers(o, fs) },
		func() (err error) { o.Proxy, err = attack.ParseProxy(proxyVersion, proxyClients); return usage(err) },
		func() (err error) { o.Scenarios, err = scenario.Parse(scen, env(o)); return usage(err) },
		func() error { return checkHostile(o, set) },
		func() (err error) { o.shard, err = shard.Parse(shardFlag, os.Getenv); return usage(err) },
		func() error { return checkMetrics(o, set) },
		func() error { return checkPlot(o.plotPath) },
		func() error {
			if why := scenario.Check(o.Scenarios, env(o)); why != "" {
				return fmt.Errorf("%w: %s", errUsage, why)
			}
			return nil
		},
	} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	if set["idle-spread"] && t.Idle > 0 && o.IdleSpread > t.Idle/2 && (slices.Contains(o.Scenarios, scenario.Idle) || slices.Contains(o.Scenarios, scenario.Keepalive)) {
		return nil, fmt.Errorf("%w: -idle-spread %s: want at most half of -idle (%s): the server's idle timer runs from the open, so later sends would find their connection reaped", errUsage, o.IdleSpread, t.Idle)
	}
	o.BarrierTimeout, o.IdleSpread = quietBounds(t.Idle, o.IdleSpread, set["idle-spread"])
	if o.Addr != "" {
		o.notes = scenario.Assumed(o.Scenarios, env(o), set)
	}
	return o, nil
}

// checkMetrics checks -metrics and -metrics-namespace (set: the flags
// given) and resolves -metrics to the URL read.
func checkMetrics(o *options, set map[string]bool) (err error) {
	switch {
	case set["metrics"] && o.Addr == "":
		return fmt.Errorf("%w: -metrics reads an external server's endpoint and needs -addr (embedded runs check their server directly)", errUsage)
	case set["metrics-namespace"] && !set["metrics"]:
		return fmt.Errorf("%w: -metrics-namespace names the metrics read from -metrics, and needs it", errUsage)
	case !observe.ValidNamespace(o.metricsNS):
		return fmt.Errorf("%w: -metrics-namespace %q is not a Prometheus name ([a-zA-Z_][a-zA-Z0-9_]*)", errUsage, o.metricsNS)
	case set["metrics"]:
		if o.metrics, err = observe.Target(o.metrics, o.Addr); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	return nil
}

// timeoutFlags declares the flags of the server's timeouts, into t.
func timeoutFlags(fs *flag.FlagSet, t *report.Timeouts) {
	fs.DurationVar(&t.Idle, "idle", 2*time.Second, "server idle timeout (0: off)")
	fs.DurationVar(&t.KeepaliveTime, "keepalive", 500*time.Millisecond, "server keepalive time: read silence before a ping (0: off)")
	fs.DurationVar(&t.KeepaliveTimeout, "keepalive-timeout", 500*time.Millisecond, "server keepalive timeout: wait for an answer to each ping")
	fs.IntVar(&t.KeepaliveCount, "keepalive-count", 1, "server keepalive pings before giving up")
	fs.DurationVar(&t.Frame, "frame-timeout", time.Second, "server frame deadline, first byte to last (0: off); raw, with -addr: the server's request deadline, which slowloris is judged against only when given")
	fs.DurationVar(&t.Handshake, "handshake", 0, "server handshake timeout: a connection that sends nothing is closed this long after it opened (0: none known). The handshake scenario needs it;\n"+
		"the embedded netwheel server gets it as its HandshakeTimeout (raw: until the first byte; framed: the first frame), and the run's other connections then prove themselves at once")
	fs.DurationVar(&t.InitialRTO, "rto", 100*time.Millisecond, "server initial retransmission timeout")
	fs.DurationVar(&t.MinRTO, "min-rto", 50*time.Millisecond, "server minimum retransmission timeout")
	fs.DurationVar(&t.MaxRTO, "max-rto", 10*time.Second, "server maximum retransmission timeout")
	fs.IntVar(&t.MaxRetransmits, "max-retransmits", 3, "server retransmissions before giving up")
	fs.DurationVar(&t.GiveUpAfter, "give-up", 5*time.Second, "server give-up time for an unacknowledged message")
	fs.DurationVar(&t.Tick, "tick", time.Millisecond, "server timer tick: closes earlier than this count as early")
}

// knownTimeouts returns what the flags fs parsed told of an external
// server's timeouts: the ones given, the others zero, and the harness's
// slack.
func knownTimeouts(fs *flag.FlagSet, slack time.Duration) *report.Timeouts {
	k := &report.Timeouts{}
	kfs := flag.NewFlagSet("known", flag.ContinueOnError)
	timeoutFlags(kfs, k)
	*k = report.Timeouts{Slack: slack}
	fs.Visit(func(f *flag.Flag) {
		if kfs.Lookup(f.Name) != nil {
			_ = kfs.Set(f.Name, f.Value.String()) // parsed once already
		}
	})
	return k
}

// parseProto sets o.Proto from -proto: by default framed for the embedded
// server, raw with -addr or a raw protocol of the user's (-payload,
// -expect, -preset).
func parseProto(o *options, proto string, set map[string]bool) error {
	switch proto {
	case "":
		o.Proto = attack.Raw
		if o.Addr == "" && !set["payload"] && !set["expect"] && !set["preset"] {
			o.Proto = attack.Framed
		}
	case "raw":
		o.Proto = attack.Raw
	case "framed":
		o.Proto = attack.Framed
	default:
		return fmt.Errorf("%w: -proto %q: want raw or framed", errUsage, proto)
	}
	return nil
}

// maxTimeout bounds every duration flag that describes the server, and
// the horizon: a run waits for the longest of them, so an absurd one
// would run until killed.
const maxTimeout = time.Hour

// checkNumbers rejects numbers no run can use: counts below 1, rates out
// of range, and in every flag of fs negative counts and negative or
// absurd durations.
func checkNumbers(o *options, fs *flag.FlagSet) error {
	t := &o.Timeouts
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(flag.Getter).Get().(type) {
		case time.Duration:
			if f.Name != "duration" && f.Name != "close-horizon" && (v < 0 || v > maxTimeout) {
				err = cmp.Or(err, fmt.Errorf("%w: -%s %s: want 0 to %s (0: the server has none)", errUsage, f.Name, v, maxTimeout))
			}
		case int:
			if v < 0 {
				err = cmp.Or(err, fmt.Errorf("%w: -%s %d is negative", errUsage, f.Name, v))
			}
		}
	})
	switch {
	case err != nil:
		return err
	case o.conns < 1 || o.conns > 1_000_000:
		return fmt.Errorf("%w: -conns %d: want 1 to 1000000 connections per scenario", errUsage, o.conns)
	case !(o.Rate > 0) || o.Rate > 1e6:
		return fmt.Errorf("%w: -rate %v: want more than 0 and at most 1e6 messages/s per connection", errUsage, o.Rate)
	case o.Payload == nil && (o.Size < 1 || o.Size > frame.DefaultMax-9):
		return fmt.Errorf("%w: -size %d: want 1 to %d bytes", errUsage, o.Size, frame.DefaultMax-9)
	case o.Duration <= 0 || o.Duration > 24*time.Hour:
		return fmt.Errorf("%w: -duration %s: want more than 0 and at most 24h", errUsage, o.Duration)
	case o.ChurnRate < 0 || o.ChurnRate > 1e5:
		return fmt.Errorf("%w: -churn-rate %v: want 0 to 1e5 connections/s", errUsage, o.ChurnRate)
	case o.DialConcurrency < 1:
		return fmt.Errorf("%w: -dial-concurrency %d: want at least 1", errUsage, o.DialConcurrency)
	case o.CloseHorizon < t.Slack || o.CloseHorizon > maxTimeout:
		return fmt.Errorf("%w: -close-horizon %s: want at least -slack (%s) and at most %s", errUsage, o.CloseHorizon, t.Slack, maxTimeout)
	}
	return nil
}

// checkOutputs checks, before the run, that the result files can be
// written: a run's figures are not lost to a typo in a path found after
// it. A file that did not exist is left so.
func checkOutputs(jsonPath, plotPath string) error {
	if err := checkPlot(plotPath); err != nil {
		return err
	}
	for _, p := range []string{jsonPath, plotPath} {
		if p == "" {
			continue
		}
		_, statErr := os.Stat(p)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		f.Close()
		if os.IsNotExist(statErr) {
			os.Remove(p) // written after the run
		}
	}
	return nil
}

// checkPlot checks -plot's file type.
func checkPlot(path string) error {
	if ext := filepath.Ext(path); path != "" && ext != ".svg" && ext != ".html" {
		return fmt.Errorf("%w: -plot %q: want a .svg or .html file", errUsage, path)
	}
	return nil
}

// scenarioHelp lists the scenarios for -h, from the scenario table.
func scenarioHelp() string {
	var b strings.Builder
	for _, s := range scenario.All {
		fmt.Fprintf(&b, "  %-10s %s\n", s.Name, s.Doc)
	}
	return b.String()
}
