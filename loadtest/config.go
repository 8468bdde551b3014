package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
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

// presets are -preset's protocols: each message, and what its answer must
// be (ParseExpect's syntax). http's Host is -addr.
var presets = map[string]struct{ payload, expect string }{
	"redis":     {payload: `PING\r\n`, expect: `+PONG\r\n`},
	"memcached": {payload: `version\r\n`, expect: `VERSION `},
	"http":      {payload: `GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: netwheel-loadtest\r\n\r\n`, expect: `HTTP/1.`},
	"line":      {payload: `ping\n`},
}

// parseExchange sets o.payload and o.expect from -payload, -expect and
// -preset (set: the flags given): raw only; a protocol other than echo
// only with -addr, the embedded servers being echo servers.
func parseExchange(o *options, payload, expect, preset string, set map[string]bool) error {
	if !set["payload"] && !set["expect"] && !set["preset"] {
		return nil
	}
	if o.proto != attack.Raw {
		return fmt.Errorf("%w: -payload, -expect and -preset describe a raw protocol; they cannot be used with -proto framed", errUsage)
	}
	if (set["payload"] || set["preset"]) && set["size"] {
		return fmt.Errorf("%w: -size is the length of the default payload; with -payload or -preset, leave it out", errUsage)
	}
	if set["preset"] {
		pr, ok := presets[preset]
		if !ok {
			return fmt.Errorf("%w: -preset %q: want redis, memcached, http or line", errUsage, preset)
		}
		if !set["payload"] {
			payload = pr.payload
			if preset == "http" {
				payload = fmt.Sprintf(payload, o.addr)
			}
		}
		if !set["expect"] {
			expect = pr.expect
		}
	}
	var err error
	if o.expect, err = attack.ParseExpect(expect); err != nil {
		return fmt.Errorf("%w: -expect: %v", errUsage, err)
	}
	if preset == "line" && !set["expect"] {
		o.expect = attack.Expect{Kind: attack.AnswerLine} // any line
	}
	if o.expect.Kind != attack.AnswerEcho && o.addr == "" {
		return fmt.Errorf("%w: -expect and -preset describe an external server's protocol and need -addr (the embedded servers echo)", errUsage)
	}
	if set["payload"] || set["preset"] {
		b, err := attack.Unescape(payload)
		if err != nil {
			return fmt.Errorf("%w: -payload: %v", errUsage, err)
		}
		if len(b) == 0 || len(b) > frame.DefaultMax-9 {
			return fmt.Errorf("%w: -payload: want 1 to %d bytes, got %d", errUsage, frame.DefaultMax-9, len(b))
		}
		o.payload, o.size = b, len(b)
	}
	return nil
}

// timeoutFlags maps each server timeout flag to the field of
// report.Timeouts it sets, for knownTimeouts.
var timeoutFlags = map[string]func(t *report.Timeouts) any{
	"idle":              func(t *report.Timeouts) any { return &t.Idle },
	"keepalive":         func(t *report.Timeouts) any { return &t.KeepaliveTime },
	"keepalive-timeout": func(t *report.Timeouts) any { return &t.KeepaliveTimeout },
	"keepalive-count":   func(t *report.Timeouts) any { return &t.KeepaliveCount },
	"frame-timeout":     func(t *report.Timeouts) any { return &t.Frame },
	"handshake":         func(t *report.Timeouts) any { return &t.Handshake },
	"rto":               func(t *report.Timeouts) any { return &t.InitialRTO },
	"min-rto":           func(t *report.Timeouts) any { return &t.MinRTO },
	"max-rto":           func(t *report.Timeouts) any { return &t.MaxRTO },
	"max-retransmits":   func(t *report.Timeouts) any { return &t.MaxRetransmits },
	"give-up":           func(t *report.Timeouts) any { return &t.GiveUpAfter },
	"tick":              func(t *report.Timeouts) any { return &t.Tick },
}

// knownTimeouts returns what is known of an external server's timeouts:
// t with the server's fields that no flag gave zeroed (the harness's own,
// the slack, kept).
func knownTimeouts(t report.Timeouts, set map[string]bool) *report.Timeouts {
	k := t
	for name, field := range timeoutFlags {
		if set[name] {
			continue
		}
		switch f := field(&k).(type) {
		case *time.Duration:
			*f = 0
		case *int:
			*f = 0
		}
	}
	return &k
}

// assumedTimeouts returns a note for each timeout an external server's
// scenario is judged against that no flag gave: the harness's default is
// assumed.
func assumedTimeouts(o *options, set map[string]bool) []string {
	need := map[string][]string{
		scenario.Idle:       {"idle"},
		scenario.Keepalive:  {"keepalive", "keepalive-timeout", "keepalive-count"},
		scenario.Retransmit: {"rto", "min-rto", "max-rto", "max-retransmits", "give-up"},
		scenario.Slowloris:  {"frame-timeout"},
	}
	var notes []string
	for _, s := range o.scenarios {
		if notApplicable(o, s) != "" {
			continue
		}
		var missing []string
		for _, name := range need[s] {
			if !set[name] {
				missing = append(missing, "-"+name)
			}
		}
		if len(missing) > 0 {
			notes = append(notes, fmt.Sprintf("%s: judged against the harness's default %s (not given: the server's own may differ)", s, strings.Join(missing, ", ")))
		}
	}
	return notes
}

// env is what the scenario table needs to know of the run o describes.
func env(o *options) scenario.Env {
	e := scenario.Env{Proto: o.proto, External: o.addr != "", EchoAnswers: o.expect.Kind == attack.AnswerEcho,
		CountedAnswers: o.expect.Counted(), OtherProtocol: o.payload != nil || o.expect.Kind != attack.AnswerEcho,
		Expect: o.expect.String(), Size: o.size, Handshake: o.timeouts.Handshake, Frame: o.timeouts.Frame, MaxConns: o.maxConns,
		HostileBytes: o.hostileBytes, OutputLimit: o.outputLimit, UnackedLimit: o.unackedLimit}
	if o.known != nil {
		e.Frame = o.known.Frame // an external server's request deadline: only if given
	}
	return e
}

// notApplicable returns why scenario s cannot be judged in the run o
// describes, or "" (scenario.Spec.NotApplicable).
func notApplicable(o *options, s string) string { return scenario.Lookup(s).NotApplicable(env(o)) }

// parseScenarios parses -scenario: a comma-separated list, or all (the
// default; mixed is its old name): every scenario that applies in e and
// is in the default set (scenario.Spec.InDefault). A scenario named that
// needs the framed protocol is an error over raw, unless the protocol is
// the user's own (other), where it is reported not applicable.
func parseScenarios(s string, e scenario.Env) ([]string, error) {
	var out []string
	if s == "" || s == "all" || s == "mixed" {
		for i := range scenario.All {
			if sp := &scenario.All[i]; sp.InDefault(e) {
				out = append(out, sp.Name)
			}
		}
		return out, nil
	}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		sp := scenario.Lookup(n)
		switch {
		case n == "all" || n == "mixed":
			return nil, fmt.Errorf("%w: -scenario all means every scenario that applies; do not combine it with others", errUsage)
		case sp == nil:
			return nil, fmt.Errorf("%w: -scenario %q: want all or some of %s", errUsage, n, strings.Join(scenario.Names(), ", "))
		case sp.Framed && e.Proto != scenario.Framed && !e.OtherProtocol:
			return nil, fmt.Errorf("%w: -scenario %s needs -proto framed", errUsage, n)
		case slices.Contains(out, n):
			return nil, fmt.Errorf("%w: -scenario %s given twice", errUsage, n)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b string) int { return scenario.Index(a) - scenario.Index(b) })
	return out, nil
}

// checkTimeouts rejects timeout flags the chosen scenarios cannot work with.
func checkTimeouts(o *options) error {
	t := o.timeouts
	for _, d := range []time.Duration{t.Idle, t.KeepaliveTime, t.KeepaliveTimeout, t.Frame, t.Handshake, t.InitialRTO, t.MinRTO, t.MaxRTO, t.GiveUpAfter} {
		if d < 0 {
			return fmt.Errorf("%w: timeouts must not be negative", errUsage)
		}
	}
	has := func(s string) bool {
		return slices.Contains(o.scenarios, s) && notApplicable(o, s) == ""
	}
	// What is known of the server's other timeouts: an external server's
	// only as far as the flags gave them.
	known := t
	if o.known != nil {
		known = *o.known
	}
	switch {
	case has(scenario.Handshake) && t.Handshake == 0:
		return fmt.Errorf("%w: the handshake scenario needs -handshake > 0, the server's handshake timeout", errUsage)
	case has(scenario.Handshake) && known.Idle > 0 && t.Handshake >= known.Idle:
		return fmt.Errorf("%w: the handshake scenario needs -handshake (%s) below -idle (%s), or its silent connections die idle", errUsage, t.Handshake, known.Idle)
	case has(scenario.Handshake) && o.proto == attack.Framed && known.DeadPeerAfter() > 0 && t.Handshake >= known.DeadPeerAfter():
		// A PONG is a frame, which would complete the handshake: the
		// silent connections do not answer PINGs.
		return fmt.Errorf("%w: the handshake scenario needs -handshake (%s) below keepalive + count x timeout (%s), or its silent connections die as dead peers", errUsage, t.Handshake, known.DeadPeerAfter())
	case has(scenario.Idle) && t.Idle == 0:
		return fmt.Errorf("%w: the idle scenario needs -idle > 0", errUsage)
	case has(scenario.Keepalive) && (t.KeepaliveTime == 0 || t.KeepaliveTimeout == 0):
		return fmt.Errorf("%w: the keepalive scenario needs -keepalive and -keepalive-timeout > 0", errUsage)
	case has(scenario.Keepalive) && t.Idle > 0 && t.DeadPeerAfter() >= t.Idle:
		return fmt.Errorf("%w: the keepalive scenario needs keepalive + count x timeout (%s) below -idle (%s), or silent peers die idle", errUsage, t.DeadPeerAfter(), t.Idle)
	case t.Handshake > 0 && has(scenario.Echo) && !o.closed && firstSend(o.rate, 1) >= t.Handshake:
		return fmt.Errorf("%w: echo's connections send their first message up to 1/-rate (%s) after they open, not before -handshake (%s): the server would close them first; raise -rate",
			errUsage, firstSend(o.rate, 1), t.Handshake)
	case t.Handshake > 0 && has(scenario.Splitter) && firstSend(o.rate, 3) >= t.Handshake:
		return fmt.Errorf("%w: splitter's connections send their first write up to 3/-rate (%s) after they open, not before -handshake (%s): the server would close them first; raise -rate",
			errUsage, firstSend(o.rate, 3), t.Handshake)
	case has(scenario.Slowloris) && t.Frame == 0:
		return fmt.Errorf("%w: the slowloris scenario needs -frame-timeout > 0", errUsage)
	}
	if has(scenario.Retransmit) {
		_, giveUp, err := attack.Ladder(t)
		if err != nil {
			return fmt.Errorf("%w: retransmit flags: %v", errUsage, err)
		}
		if t.Idle > 0 && giveUp >= t.Idle {
			return fmt.Errorf("%w: the retransmit scenario needs the give-up (%s) before -idle (%s)", errUsage, giveUp, t.Idle)
		}
	}
	return nil
}

// firstSend is how long after it opens a paced connection sends its first
// write at most: its phase in the pacer's interval (1/rate), and for a
// splitter, which joins up to 3 messages in a write, two intervals more
// (intervals: 3).
func firstSend(rate float64, intervals int) time.Duration {
	return time.Duration(float64(intervals) * float64(time.Second) / rate)
}

// Defaults of the server limits the memory bound is derived from: those
// of netserver.Limits, and the fixed allowance.
const (
	defaultOutputLimit  = 4 << 20
	defaultUnackedLimit = 1 << 20
	defaultMemAllowance = 32 << 20
	// floodMargin is how many connections beyond -max-conns connflood
	// opens by default.
	floodMargin = 200
)

// checkHostile validates the hostile scenarios' flags and fills in the
// defaults that depend on others (set: the flags given).
func checkHostile(o *options, set map[string]bool) error {
	for name, n := range map[string]int{"nonreader-conns": o.nonreaders, "splitter-conns": o.splitters, "pingflood-conns": o.pingflooders,
		"garbage-conns": o.garbageConns, "flood-conns": o.floodConns, "max-conns": o.maxConns} {
		if n < 0 {
			return fmt.Errorf("%w: -%s %d is negative", errUsage, name, n)
		}
	}
	switch {
	case o.hostileBytes < 1:
		return fmt.Errorf("%w: -hostile-bytes %d: want at least 1", errUsage, o.hostileBytes)
	case o.outputLimit < 0 || o.unackedLimit < 0 || o.memAllowance < 0:
		return fmt.Errorf("%w: -output-limit, -unacked-limit and -mem-allowance must not be negative", errUsage)
	case o.serverPID < 0:
		return fmt.Errorf("%w: -server-pid %d is negative", errUsage, o.serverPID)
	case o.serverPID > 0 && o.addr == "":
		return fmt.Errorf("%w: -server-pid names an external server's process and needs -addr (an embedded server is this process)", errUsage)
	}
	for s, n := range map[string]int{scenario.Nonreader: o.nonreaders, scenario.Splitter: o.splitters, scenario.Pingflood: o.pingflooders, scenario.Garbage: o.garbageConns} {
		if n == 0 && slices.Contains(o.scenarios, s) {
			return fmt.Errorf("%w: -%s-conns 0: the %s scenario needs at least 1 connection (leave it out with -scenario)", errUsage, s, s)
		}
	}
	if slices.Contains(o.scenarios, scenario.Connflood) {
		if o.maxConns == 0 {
			return fmt.Errorf("%w: the connflood scenario needs -max-conns, the server's connection limit", errUsage)
		}
		if !set["flood-conns"] {
			o.floodConns = o.maxConns + floodMargin
		}
		if o.floodConns <= o.maxConns {
			return fmt.Errorf("%w: -flood-conns %d: want more than -max-conns (%d), or the flood stays within the limit", errUsage, o.floodConns, o.maxConns)
		}
	}
	// connflood holds its connections at most half the idle timeout, so
	// that the ones the server keeps do not die idle.
	o.floodHold = time.Second
	if t := o.timeouts.Idle; t > 0 {
		o.floodHold = min(o.floodHold, t/2)
	}
	return nil
}

// byteSize is a flag.Value of a byte count: a plain number, or one with a
// K, M or G suffix (KiB, MiB, GiB; "KiB", "MiB", "GiB" and "B" are
// accepted too).
type byteSize int64

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	v := int64(*b)
	for _, u := range []struct {
		s string
		n int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i"), int64(1)
	if num != "" {
		switch num[len(num)-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			num = num[:len(num)-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return fmt.Errorf("want a byte count such as 4096, 512K or 4MiB")
	}
	*b = byteSize(v * mult)
	return nil
}
