package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/observe"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// errUsage is wrapped by every flag validation error.
var errUsage = errors.New("loadtest: bad flags")

const kindNetwheel = "netwheel"

// options is the parsed and validated command line.
type options struct {
	addr      string // "" means embedded
	server    string // netwheel (embedded) or external (-addr)
	proto     attack.Proto
	payload   []byte           // raw: each message's bytes (nil: -size bytes of the echo pattern)
	expect    attack.Expect    // raw: what an answer must be
	known     *report.Timeouts // -addr: the timeouts the flags gave (the others zero); nil embedded
	scenarios []string
	conns     int
	rate      float64
	size      int
	duration  time.Duration
	closed    bool
	fins      bool // -fins: capture the server's FINs on the loopback
	churnRate float64
	timeouts  report.Timeouts
	horizon   time.Duration // -close-horizon: how long after its deadline a close is waited for
	shardI    int           // 0-based
	shardN    int
	jsonPath  string
	plotPath  string
	quiet     bool
	version   bool // -version: print the version and exit
	maxConns  int  // embedded netwheel server's MaxConns (0: no limit)
	dialConc  int
	spread    time.Duration // quiet connections' send window (see attack.Config.IdleSpread)
	barrier   time.Duration // bound of the wait for every quiet connection to open
	cpuProf   string
	metrics   string // -addr: the server's Prometheus endpoint for the leak check ("": none)
	metricsNS string // the prefix of the server's own metrics there (netserver's Config.MetricsNamespace)

	// Hostile scenarios (attack/hostile.go): connections per scenario, what
	// a flooder sends at most, how long connflood holds, and the server's
	// limits and allowance its memory growth is judged against.
	nonreaders, splitters, pingflooders, garbageConns, floodConns int
	hostileBytes                                                  int64
	floodHold                                                     time.Duration
	outputLimit, unackedLimit, memAllowance                       int64
	serverPID                                                     int // -addr: the server's pid, for its RSS (0: none)
	edge                                                          edgeOptions

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

// Environment variables of -shard auto: a Kubernetes Indexed Job sets
// JOB_COMPLETION_INDEX (0-based) in each pod; the Job's manifest sets
// LOADTEST_SHARDS to its completions.
const (
	envShardIndex = "JOB_COMPLETION_INDEX"
	envShards     = "LOADTEST_SHARDS"
)

// parseShard parses "i/n" with 1 <= i <= n, or "auto": the 0-based index
// from $JOB_COMPLETION_INDEX and the count from $LOADTEST_SHARDS, read
// with getenv. It returns the 0-based index.
func parseShard(s string, getenv func(string) string) (i, n int, err error) {
	if s == "auto" {
		return shardFromEnv(getenv)
	}
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("%w: -shard %q: want i/n with 1 <= i <= n, such as 1/2, or auto", errUsage, s)
	}
	return i - 1, n, nil
}

// shardFromEnv is -shard auto: the shard of this pod of an Indexed Job.
func shardFromEnv(getenv func(string) string) (i, n int, err error) {
	is, ns := getenv(envShardIndex), getenv(envShards)
	switch {
	case is == "":
		return 0, 0, fmt.Errorf("%w: -shard auto: $%s is not set (Kubernetes sets it in the pods of an Indexed Job; elsewhere give -shard i/n)", errUsage, envShardIndex)
	case ns == "":
		return 0, 0, fmt.Errorf("%w: -shard auto: $%s is not set (set it in the Job's manifest to its completions, the number of shards)", errUsage, envShards)
	}
	if n, err = strconv.Atoi(ns); err != nil || n < 1 {
		return 0, 0, fmt.Errorf("%w: -shard auto: $%s=%q: want the number of shards, at least 1", errUsage, envShards, ns)
	}
	if i, err = strconv.Atoi(is); err != nil || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("%w: -shard auto: $%s=%q: want 0 to %d, below $%s=%d", errUsage, envShardIndex, is, n-1, envShards, n)
	}
	return i, n, nil
}

// shareOf returns shard i's (0-based) share of total items out of n
// shards: the shares differ by at most one and add up to total.
func shareOf(total, i, n int) int {
	s := total / n
	if i < total%n {
		s++
	}
	return s
}

// parseFlags parses the run command's flags; out receives -h's text.
func parseFlags(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(out)
	var proto, scen, shard, payload, expect, preset string
	t := &o.timeouts
	fs.StringVar(&o.addr, "addr", "", "drive an external server at `HOST:PORT` instead of the embedded one (its timeouts are then described by the timeout flags)")
	fs.StringVar(&proto, "proto", "", "client protocol: raw or framed (default framed for the embedded server, raw with -addr)")
	fs.StringVar(&scen, "scenario", "all", "comma-separated scenarios run at once (listed above), or all: every one that applies to the server\n"+
		"(framed-only ones need -proto framed; connflood needs -max-conns, handshake -handshake; slowloris over raw -frame-timeout with -addr)")
	fs.IntVar(&o.conns, "conns", 400, "connections per polite scenario (keepalive: half survive, half silent)")
	fs.Float64Var(&o.rate, "rate", 20, "echo: messages/s per connection, open loop")
	fs.IntVar(&o.size, "size", 64, "message payload `bytes`")
	fs.StringVar(&payload, "payload", "", "raw: the `bytes` of each message, Go escapes allowed (PING\\r\\n) (default: -size bytes of a letter pattern, for an echo server)")
	fs.StringVar(&expect, "expect", "", "raw, with -addr: what an answer to each message must be: `echo` (the message itself, the default); any (any bytes); none (the server answers nothing);\n"+
		"or the bytes it begins with, Go escapes allowed: a line (through its \\n) beginning so, or an HTTP/1.x response (a prefix beginning HTTP/, its body by Content-Length or chunked)")
	fs.StringVar(&preset, "preset", "", "raw, with -addr: -payload and -expect for a common protocol (either flag, given, overrides its half):\n"+
		"redis (PING / +PONG), memcached (version / VERSION), http (a keep-alive GET / / HTTP/1.), line (a line / any line)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "echo and churn sending time; the run lasts until the timer scenarios finish too")
	fs.BoolVar(&o.closed, "closed", false, "echo: closed loop (each connection sends when its previous echo arrived) instead of open loop")
	fs.Float64Var(&o.churnRate, "churn-rate", 100, "churn: connections opened (and closed) per second")
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
	fs.DurationVar(&t.Slack, "slack", 500*time.Millisecond, "how late after its deadline a close still counts as on time")
	fs.DurationVar(&o.horizon, "close-horizon", defaultHorizon, "how long after its deadline a close is still waited for, and its lateness measured; later counts as never\n"+
		"(a close on time ends the wait at once: only a late server makes the run longer)")
	fs.StringVar(&shard, "shard", "1/1", "run shard `i/n` of the connections (merge the -json files with `loadtest report`);\n"+
		"auto: shard $JOB_COMPLETION_INDEX+1 of $LOADTEST_SHARDS (a Kubernetes Indexed Job; see docs/scaling.md)")
	fs.StringVar(&o.jsonPath, "json", "", "write the full result to `FILE`")
	fs.StringVar(&o.plotPath, "plot", "", "draw latency and close-error distributions to `FILE.svg` or FILE.html")
	fs.BoolVar(&o.quiet, "q", false, "no progress line")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.fins, "fins", false, "capture the server's FINs on the loopback interface and report the close error from their kernel timestamps too,\n"+
		"which leaves out this client's delay to read the close (Linux; needs CAP_NET_RAW, else a note says it was not done)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "the server's connection limit (0: none): the embedded netwheel server's MaxConns, or what -addr's server enforces; connflood needs it")
	fs.IntVar(&o.nonreaders, "nonreader-conns", 4, "nonreader: connections that send echo traffic as fast as the server takes it and never read")
	fs.IntVar(&o.splitters, "splitter-conns", 20, "splitter: connections whose messages (at -rate, -size) are written cut at random byte boundaries and checked byte for byte")
	fs.IntVar(&o.pingflooders, "pingflood-conns", 4, "pingflood: connections that send PINGs as fast as the server takes them (half read the PONGs, half never read)")
	fs.IntVar(&o.garbageConns, "garbage-conns", 3, "garbage: connections that send random bytes (framed: in turn random, an unknown frame type, a 0xFFFFFFF0 length prefix)")
	edgeFlags(fs, o)
	fs.IntVar(&o.floodConns, "flood-conns", 0, "connflood: connections opened at once after the other scenarios, and held (default -max-conns + 200)")
	o.hostileBytes, o.outputLimit, o.unackedLimit, o.memAllowance = attack.DefaultHostileBytes, defaultOutputLimit, defaultUnackedLimit, defaultMemAllowance
	fs.Var((*byteSize)(&o.hostileBytes), "hostile-bytes", "most `bytes` one nonreader or ping flooder sends (K, M, G suffixes: KiB, MiB, GiB); then it only trickles. "+
		"nonreader is judged only above -output-limit plus 8 MiB of kernel buffers (framed: or above -unacked-limit)")
	fs.Var((*byteSize)(&o.outputLimit), "output-limit", "the server's hard limit of queued output per connection, in `bytes`, for the memory bound (embedded netwheel: its Limits.OutputHard)")
	fs.Var((*byteSize)(&o.unackedLimit), "unacked-limit", "framed: the server's limit of unacknowledged DATA payload per connection, in `bytes`, for the memory bound (embedded netwheel: its Limits.UnackedBytes)")
	fs.Var((*byteSize)(&o.memAllowance), "mem-allowance", "with hostile scenarios, the server's memory growth allowed in `bytes` besides the per-connection limits (and 32 KiB per other connection)")
	fs.IntVar(&o.serverPID, "server-pid", 0, "with -addr: the server's `PID` on this host; its RSS (/proc/PID/status) is sampled during hostile scenarios (otherwise -metrics' process_resident_memory_bytes)")
	fs.IntVar(&o.dialConc, "dial-concurrency", 128, "dials in flight at once")
	fs.DurationVar(&o.spread, "idle-spread", defaultSpread, "idle and keepalive-silent connections first all open (waiting at most 10s, keeping themselves open meanwhile), then send their last message\n"+
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

	o.server = kindNetwheel
	if o.addr != "" {
		if _, _, err := net.SplitHostPort(o.addr); err != nil {
			return nil, fmt.Errorf("%w: -addr %q: want HOST:PORT", errUsage, o.addr)
		}
		o.server = "external"
		o.known = knownTimeouts(*t, set)
	}
	if err := parseProto(o, proto, set); err != nil {
		return nil, err
	}
	if err := parseExchange(o, payload, expect, preset, set); err != nil {
		return nil, err
	}
	if err := checkNumbers(o, set); err != nil {
		return nil, err
	}
	var err error
	if o.scenarios, err = parseScenarios(scen, env(o)); err != nil {
		return nil, err
	}
	if err := checkEdge(o, set); err != nil {
		return nil, err
	}
	if err := checkHostile(o, set); err != nil {
		return nil, err
	}
	if o.shardI, o.shardN, err = parseShard(shard, os.Getenv); err != nil {
		return nil, err
	}
	if set["idle-spread"] && t.Idle > 0 && o.spread > t.Idle/2 && (slices.Contains(o.scenarios, scenario.Idle) || slices.Contains(o.scenarios, scenario.Keepalive)) {
		return nil, fmt.Errorf("%w: -idle-spread %s: want at most half of -idle (%s): the server's idle timer runs from the open, so later sends would find their connection reaped", errUsage, o.spread, t.Idle)
	}
	if set["metrics"] {
		if o.addr == "" {
			return nil, fmt.Errorf("%w: -metrics reads an external server's endpoint and needs -addr (embedded runs check their server directly)", errUsage)
		}
		if o.metrics, err = observe.Target(o.metrics, o.addr); err != nil {
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	switch {
	case set["metrics-namespace"] && !set["metrics"]:
		return nil, fmt.Errorf("%w: -metrics-namespace names the metrics read from -metrics, and needs it", errUsage)
	case !observe.ValidNamespace(o.metricsNS):
		return nil, fmt.Errorf("%w: -metrics-namespace %q is not a Prometheus name ([a-zA-Z_][a-zA-Z0-9_]*)", errUsage, o.metricsNS)
	}
	o.barrier, o.spread = quietBounds(t.Idle, o.spread, set["idle-spread"])
	if ext := filepath.Ext(o.plotPath); o.plotPath != "" && ext != ".svg" && ext != ".html" {
		return nil, fmt.Errorf("%w: -plot %q: want a .svg or .html file", errUsage, o.plotPath)
	}
	if err := checkTimeouts(o); err != nil {
		return nil, err
	}
	if o.addr != "" {
		o.notes = append(o.notes, assumedTimeouts(o, set)...)
	}
	return o, nil
}

// parseProto sets o.proto from -proto: by default framed for the embedded
// server, raw with -addr or a raw protocol of the user's (-payload,
// -expect, -preset).
func parseProto(o *options, proto string, set map[string]bool) error {
	switch proto {
	case "":
		o.proto = attack.Raw
		if o.server == kindNetwheel && !set["payload"] && !set["expect"] && !set["preset"] {
			o.proto = attack.Framed
		}
	case "raw":
		o.proto = attack.Raw
	case "framed":
		o.proto = attack.Framed
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
// of range, negative or absurd durations (set: the flags given).
func checkNumbers(o *options, set map[string]bool) error {
	t := &o.timeouts
	for name, d := range map[string]time.Duration{"idle": t.Idle, "keepalive": t.KeepaliveTime, "keepalive-timeout": t.KeepaliveTimeout,
		"frame-timeout": t.Frame, "handshake": t.Handshake, "rto": t.InitialRTO, "min-rto": t.MinRTO, "max-rto": t.MaxRTO,
		"give-up": t.GiveUpAfter, "tick": t.Tick, "slack": t.Slack, "idle-spread": o.spread} {
		if d < 0 || d > maxTimeout {
			return fmt.Errorf("%w: -%s %s: want 0 to %s (0: the server has none)", errUsage, name, d, maxTimeout)
		}
	}
	switch {
	case o.conns < 1 || o.conns > 1_000_000:
		return fmt.Errorf("%w: -conns %d: want 1 to 1000000 connections per scenario", errUsage, o.conns)
	case t.KeepaliveCount < 0 || t.MaxRetransmits < 0:
		return fmt.Errorf("%w: -keepalive-count and -max-retransmits must not be negative", errUsage)
	case !(o.rate > 0) || o.rate > 1e6:
		return fmt.Errorf("%w: -rate %v: want more than 0 and at most 1e6 messages/s per connection", errUsage, o.rate)
	case o.payload == nil && (o.size < 1 || o.size > frame.DefaultMax-9):
		return fmt.Errorf("%w: -size %d: want 1 to %d bytes", errUsage, o.size, frame.DefaultMax-9)
	case o.duration <= 0 || o.duration > 24*time.Hour:
		return fmt.Errorf("%w: -duration %s: want more than 0 and at most 24h", errUsage, o.duration)
	case o.churnRate < 0 || o.churnRate > 1e5:
		return fmt.Errorf("%w: -churn-rate %v: want 0 to 1e5 connections/s", errUsage, o.churnRate)
	case o.dialConc < 1:
		return fmt.Errorf("%w: -dial-concurrency %d: want at least 1", errUsage, o.dialConc)
	case o.horizon < t.Slack || o.horizon > maxTimeout:
		return fmt.Errorf("%w: -close-horizon %s: want at least -slack (%s) and at most %s", errUsage, o.horizon, t.Slack, maxTimeout)
	}
	return nil
}

// checkOutputs checks, before the run, that the result files can be
// written: a run's figures are not lost to a typo in a path found after
// it. A file that did not exist is left so.
func checkOutputs(jsonPath, plotPath string) error {
	if plotPath != "" {
		if ext := filepath.Ext(plotPath); ext != ".svg" && ext != ".html" {
			return fmt.Errorf("%w: -plot %q: want a .svg or .html file", errUsage, plotPath)
		}
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

// scenarioHelp lists the scenarios for -h, from the scenario table.
func scenarioHelp() string {
	var b strings.Builder
	for _, s := range scenario.All {
		fmt.Fprintf(&b, "  %-10s %s\n", s.Name, s.Doc)
	}
	return b.String()
}
