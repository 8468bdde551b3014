package netserver

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// Protocol is the wire protocol a Server speaks.
type Protocol uint8

const (
	// Raw is a plain byte stream: any inbound byte is activity, and the
	// handler sees the bytes as they arrive. It works with nc or any TCP
	// client. It has no keepalive probe and no retransmission (use the
	// kernel's keepalive, KernelConfig, for dead peers).
	Raw Protocol = iota
	// Framed is netwheel's length-prefixed protocol (docs/protocol.md):
	// acknowledged, retransmitted data, keepalive pings and close frames
	// with a reason.
	Framed
)

func (p Protocol) String() string {
	switch p {
	case Raw:
		return "raw"
	case Framed:
		return "framed"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ParseProtocol parses "raw" or "framed".
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "raw":
		return Raw, nil
	case "framed":
		return Framed, nil
	}
	return 0, fmt.Errorf("%w: protocol %q: want raw or framed", ErrConfig, s)
}

// ErrConfig is wrapped by every configuration error New returns.
var ErrConfig = errors.New("netserver: invalid config")

// Off turns a setting off: any negative value does, and Off names one. It
// is an untyped constant, so it fits a count and a duration alike.
const Off = -1

// Config configures a Server. Every field follows one rule, as in idle's
// and retransmit's Configs, which it holds: zero means the default the
// field documents, and a negative value (Off) turns a protection off; a
// setting that cannot be off (a size, a tick) says so. The zero Config but
// for Addr is therefore the safe one: every timeout and limit is on.
// DefaultConfig spells those defaults out. New validates the whole and says
// what is wrong.
type Config struct {
	// Addr is the TCP address to listen on, host:port. Port 0 picks a free
	// port; Server.Addr reports it.
	Addr string
	// Protocol is Raw (the zero value) or Framed.
	Protocol Protocol
	// EventLoops is the number of gnet event loops; 0 means GOMAXPROCS-1,
	// at least 1. It cannot be off. Each loop waits in epoll_wait holding a P (the Go
	// scheduler's processor), and a runtime timer on a P held that way
	// runs only when the runtime takes the P back, milliseconds late; the
	// timer wheel's goroutine sleeps on such a timer. With a P to spare,
	// an idle P's thread runs every P's due timers on time, and timeouts
	// fire within a tick or two. With a loop on every P (EventLoops >=
	// GOMAXPROCS, or GOMAXPROCS 1) Start logs a warning and reaps come
	// later (docs/perf.md, "Wake-ups when event loops hold every P"). To
	// keep a loop per core, run with GOMAXPROCS one above the core count,
	// as cmd/echo does (docs/design.md, "One loop per core").
	EventLoops int
	// ReusePort lets several servers (processes of the same user) share
	// the address, and the kernel balance connections between them. On
	// Linux each event loop listens on a SO_REUSEPORT socket of its own
	// either way (so that a connection flood is refused in the accept
	// that takes each connection, see docs/design.md); without ReusePort,
	// Start first makes sure nobody else listens on the address and fails
	// with "address already in use" as a single listener would.
	ReusePort bool
	// Tick is the timer wheel's resolution; 0 means 1ms. A timeout fires
	// at the first tick at or after its deadline, so it comes half a tick
	// late on average. The event loops arm their timers from exact times,
	// so a finer tick costs nothing while traffic flows; it costs wake-ups
	// (and CPU) when many timers fall due at once. It cannot be off.
	Tick time.Duration
	// Timeouts are the per-connection timeouts (idle, read silence,
	// keepalive, frame, handshake, max age, write stall); zero fields take
	// idle's defaults (idle.Config) and Off turns one off. The keepalive
	// default applies with Framed only: Raw has no probe of its own (a Raw
	// handler that implements Prober may set KeepaliveTime). The frame
	// default applies with Framed, and with Raw and HandlerMarks, where
	// it is the per-request deadline; Raw has no frames otherwise. The frame deadline runs from the first byte of a
	// frame to its last (Framed), and the
	// handshake deadline until the first complete frame (Framed) or the
	// first byte (Raw). The write-stall timeout closes a connection whose
	// output has been queued (the socket buffer being full) without
	// progress for that long: no queued byte drained and, on Linux, no byte
	// acknowledged by the peer (TCP_INFO). A peer that keeps reading,
	// however slowly, is never closed by it; Limits bound how much may
	// queue meanwhile.
	Timeouts idle.Config
	// Retransmit configures RFC 6298 retransmission of the DATA frames the
	// server sends (Framed only); zero fields take retransmit's defaults,
	// and Off turns its give-up limits off (retransmit.Config).
	Retransmit retransmit.Config
	// MaxConns bounds the open connections. Connections beyond it are
	// closed at once with ReasonOverload (and, Framed, a CLOSE frame saying
	// so). 0, the default, derives it at Start from the process's open-file
	// limit (RLIMIT_NOFILE's soft limit): the limit less 64 descriptors and
	// 3 per event loop (half the limit if that leaves less), so that a
	// flood of connections is refused one at a time instead of exhausting
	// the descriptors, which would stop gnet's engine (its accept fails
	// with EMFILE) and close every connection. Where the limit is unknown
	// or unlimited there is no bound. Negative means no bound; the server
	// then depends on the open-file limit never being reached.
	MaxConns int
	// MaxFrame is the largest frame length accepted (Framed), or the most
	// unconsumed input a StreamHandler may leave (Raw); 0 means 64 KiB. It
	// cannot be off.
	// A longer frame, or more input left, closes the connection with
	// ReasonTooLarge (a frame before it is read).
	MaxFrame int
	// Limits bound the memory one connection may hold: queued output,
	// unacknowledged data. They are on by default (zero fields) and Off
	// turns one off; crossing one closes only that connection, with a
	// reason that is logged and counted.
	Limits Limits
	// HandlerMarks (Raw) lets the handler say what its protocol's events
	// are: inbound bytes then count only as signs of life (read silence,
	// keepalive answers), and the handler calls Conn.Activity for
	// application activity (the idle timeout), Conn.RequestStart and
	// RequestEnd around each request (Timeouts.FrameTimeout is then the
	// per-request deadline) and Conn.HandshakeDone when its handshake is
	// done. Without it every inbound byte is activity and the first
	// completes the handshake. It is for Raw only: with Framed, New fails.
	HandlerMarks bool
	// Kernel sets the kernel's own TCP backstops on every connection; its
	// zero fields leave the system's settings (KernelConfig).
	Kernel KernelConfig
	// SilentShutdown makes Shutdown close framed connections without
	// sending them a GOAWAY or a CLOSE frame: each is closed once nothing
	// is unfinished, or at the deadline.
	SilentShutdown bool
	// Logger receives structured logs; nil discards them. Each close is
	// logged with its reason: at debug level when the connection ended
	// normally (ReasonPeerClosed, ReasonIdle, ReasonMaxAge,
	// ReasonServerClosed, ReasonShutdown, ReasonApplication), at info for a timeout that
	// found the peer gone or too slow, at warn for a broken protocol, a
	// limit crossed or an error.
	Logger *slog.Logger
	// Registerer, if not nil, also receives the server's Prometheus
	// metrics (MetricsHandler serves them either way).
	Registerer prometheus.Registerer
	// MetricsNamespace prefixes every metric's name; "" means "netwheel"
	// (netwheel_connections_open). MetricsLabels are constant labels put on
	// every metric, so that several servers can share one Registerer
	// (say {"server": "api"} and {"server": "admin"}); a label named
	// "reason" is taken by the close counters.
	MetricsNamespace string
	MetricsLabels    prometheus.Labels
}

// Default limits, used where a Limits field is zero.
const (
	DefaultOutputHard     = 4 << 20          // queued output that closes a connection at once
	DefaultOutputSoft     = 1 << 20          // queued output that may last only OutputSoftFor
	DefaultOutputSoftFor  = 10 * time.Second // how long output may stay above OutputSoft
	DefaultUnackedBytes   = 1 << 20          // unacknowledged DATA payload per connection (Framed)
	DefaultPingsPerSecond = 100              // PINGs a peer may send per second, and at once (Framed)
)

// Limits bound what one connection may hold in the server's memory, in the
// manner of Redis's client-output-buffer-limit. Every zero field means its
// default (Default*), so the zero Limits is on; a negative field turns that
// bound off. Crossing a bound closes only that connection: with
// ReasonOutputLimit for queued output, with ReasonUnackedLimit for
// unacknowledged data. The close is logged at warn level with the sizes.
//
// Queued output is what the server has written to a connection that the
// kernel's socket buffer has not taken yet: gnet's outbound buffer for the
// connection, plus what the running event has batched for it. It grows only
// when the peer reads slower than the server writes.
type Limits struct {
	// OutputHard closes the connection as soon as its queued output would
	// exceed this many bytes. 0 means DefaultOutputHard (4 MiB).
	OutputHard int
	// OutputSoft and OutputSoftFor close the connection when its queued
	// output has stayed above OutputSoft bytes for OutputSoftFor, measured
	// from the first time the server saw it above (it looks when it writes
	// to the connection and a few times per OutputSoftFor while output is
	// queued). A burst above it that drains in time is allowed. 0 means
	// DefaultOutputSoft (1 MiB) and DefaultOutputSoftFor (10 s).
	OutputSoft    int
	OutputSoftFor time.Duration
	// UnackedBytes bounds the DATA payload bytes sent and not yet
	// acknowledged (Framed), which the server keeps for retransmission:
	// Send fails with ErrUnackedLimit beyond it (Echo then closes with
	// ReasonUnackedLimit). retransmit.Config.Window bounds their number.
	// 0 means DefaultUnackedBytes (1 MiB).
	UnackedBytes int
	// PingsPerSecond bounds the PINGs a peer may send (Framed): a second's
	// worth at once, then that many a second. A PING beyond it closes the
	// connection with ReasonPingFlood: answering a flood of PINGs would
	// spend the event loop's time, and other connections', on a peer that
	// gains nothing from it (HTTP/2's ping flood; gRPC's too_many_pings).
	// 0 means DefaultPingsPerSecond (100).
	PingsPerSecond int
}

// limits are Limits with the defaults filled in and "off" as the largest int.
type limits struct {
	outputHard    int
	outputSoft    int
	outputSoftFor time.Duration // 0: no soft limit
	unackedBytes  int
	pingInterval  time.Duration // 0: PINGs unlimited
}

func (l Limits) resolve() limits {
	pick := func(v, def int) int {
		switch {
		case v == 0:
			return def
		case v < 0:
			return math.MaxInt
		}
		return v
	}
	r := limits{
		outputHard:    pick(l.OutputHard, DefaultOutputHard),
		outputSoft:    pick(l.OutputSoft, DefaultOutputSoft),
		outputSoftFor: l.OutputSoftFor,
		unackedBytes:  pick(l.UnackedBytes, DefaultUnackedBytes),
	}
	if pps := pick(l.PingsPerSecond, DefaultPingsPerSecond); pps != math.MaxInt {
		r.pingInterval = max(time.Second/time.Duration(pps), 1)
	}
	switch {
	case l.OutputSoftFor == 0:
		r.outputSoftFor = DefaultOutputSoftFor
	case l.OutputSoftFor < 0:
		r.outputSoft = math.MaxInt
	}
	if r.outputSoft == math.MaxInt {
		r.outputSoftFor = 0
	}
	return r
}

// KernelConfig are the kernel's TCP backstops: they catch dead peers even if
// the process stalls. A zero field means the default, which is the system's
// setting (the server sets nothing); what that means is said per field.
// They cannot be negative.
type KernelConfig struct {
	// KeepaliveIdle enables TCP keepalive after this long idle
	// (TCP_KEEPIDLE); 0 leaves keepalive as the system has it (off for
	// new sockets on Linux). With KeepaliveIdle set, a zero
	// KeepaliveInterval is KeepaliveIdle/5 (TCP_KEEPINTVL) and a zero
	// KeepaliveCount is 5 (TCP_KEEPCNT), as gnet sets them; they are not
	// the system's defaults (net.ipv4.tcp_keepalive_intvl and _probes).
	KeepaliveIdle     time.Duration
	KeepaliveInterval time.Duration
	KeepaliveCount    int
	// UserTimeout sets TCP_USER_TIMEOUT (Linux; ignored elsewhere): the
	// kernel drops the connection when sent data stays unacknowledged this
	// long.
	UserTimeout time.Duration
}

// validate checks c and resolves its Timeouts (see timeouts), as New needs
// them.
func (c *Config) validate() error {
	if c.Addr == "" {
		return fmt.Errorf("%w: Addr is empty: want host:port, e.g. 127.0.0.1:9000", ErrConfig)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("%w: Addr %q: %v", ErrConfig, c.Addr, err)
	}
	return c.check()
}

// check is validate but for Addr.
func (c *Config) check() error {
	if c.Protocol != Raw && c.Protocol != Framed {
		return fmt.Errorf("%w: %v: want Raw or Framed", ErrConfig, c.Protocol)
	}
	if c.EventLoops < 0 {
		return fmt.Errorf("%w: EventLoops %d is negative", ErrConfig, c.EventLoops)
	}
	if c.Tick != 0 && (c.Tick < wheel.MinTick || c.Tick > wheel.MaxTick) {
		return fmt.Errorf("%w: Tick %v outside [%v, %v]", ErrConfig, c.Tick, wheel.MinTick, wheel.MaxTick)
	}
	timeouts, err := c.timeouts()
	if err != nil {
		return fmt.Errorf("%w: Timeouts: %w", ErrConfig, err)
	}
	if c.Protocol == Raw && c.Timeouts.FrameTimeout > 0 && !c.HandlerMarks {
		return fmt.Errorf("%w: Timeouts.FrameTimeout needs the framed protocol, or HandlerMarks (raw has no frames; a handler marks its requests)", ErrConfig)
	}
	if c.Protocol == Framed && c.HandlerMarks {
		return fmt.Errorf("%w: HandlerMarks is for the raw protocol: framed frames mark their own activity, requests and handshake", ErrConfig)
	}
	if c.Protocol == Framed {
		if _, err := retransmit.NewEstimator(c.Retransmit); err != nil {
			return fmt.Errorf("%w: Retransmit: %w", ErrConfig, err)
		}
	}
	if c.MaxFrame < 0 || c.MaxFrame > 1<<30 {
		return fmt.Errorf("%w: MaxFrame %d outside [0, 1GiB]", ErrConfig, c.MaxFrame)
	}
	if c.MaxFrame != 0 && c.MaxFrame < frame.DataHeaderSize {
		return fmt.Errorf("%w: MaxFrame %d below the smallest frame", ErrConfig, c.MaxFrame)
	}
	if c.MetricsNamespace != "" && !metricName.MatchString(c.MetricsNamespace) {
		return fmt.Errorf("%w: MetricsNamespace %q is not a Prometheus name ([a-zA-Z_][a-zA-Z0-9_]*)", ErrConfig, c.MetricsNamespace)
	}
	for k := range c.MetricsLabels {
		if !metricName.MatchString(k) || strings.HasPrefix(k, "__") || k == "reason" {
			return fmt.Errorf("%w: MetricsLabels: %q is not a label name the metrics can take", ErrConfig, k)
		}
	}
	l := c.Limits
	if l.OutputHard > 0 && l.OutputSoft > l.OutputHard {
		return fmt.Errorf("%w: Limits.OutputSoft %d above Limits.OutputHard %d: the hard limit would always close first", ErrConfig, l.OutputSoft, l.OutputHard)
	}
	if l.OutputHard == 0 && l.OutputSoft > DefaultOutputHard {
		return fmt.Errorf("%w: Limits.OutputSoft %d above the default Limits.OutputHard %d: raise OutputHard too", ErrConfig, l.OutputSoft, DefaultOutputHard)
	}
	if c.Protocol == Raw && l.PingsPerSecond > 0 {
		return fmt.Errorf("%w: Limits.PingsPerSecond needs the framed protocol (raw has no PING)", ErrConfig)
	}
	if c.Protocol == Raw && l.UnackedBytes > 0 {
		return fmt.Errorf("%w: Limits.UnackedBytes needs the framed protocol (raw has no acknowledgements)", ErrConfig)
	}
	if c.Protocol == Framed {
		// One largest message must fit each bound, or Echo would close a
		// polite peer for sending it.
		maxFrame, r := cmp.Or(c.MaxFrame, frame.DefaultMax), l.resolve()
		if payload := maxFrame - (frame.DataHeaderSize - frame.LenSize); payload > r.unackedBytes {
			return fmt.Errorf("%w: MaxFrame %d allows %d-byte messages, above Limits.UnackedBytes %d: raise UnackedBytes or lower MaxFrame",
				ErrConfig, maxFrame, payload, r.unackedBytes)
		}
		if wire := frame.LenSize + maxFrame; wire > r.outputHard {
			return fmt.Errorf("%w: MaxFrame %d makes %d-byte frames, above Limits.OutputHard %d: raise OutputHard or lower MaxFrame",
				ErrConfig, maxFrame, wire, r.outputHard)
		}
	}
	k := c.Kernel
	if k.KeepaliveIdle < 0 || k.KeepaliveInterval < 0 || k.KeepaliveCount < 0 || k.UserTimeout < 0 {
		return fmt.Errorf("%w: Kernel settings must not be negative", ErrConfig)
	}
	if k.KeepaliveIdle == 0 && (k.KeepaliveInterval != 0 || k.KeepaliveCount != 0) {
		return fmt.Errorf("%w: Kernel.KeepaliveInterval/Count need Kernel.KeepaliveIdle", ErrConfig)
	}
	c.Timeouts = timeouts
	return nil
}

// timeouts resolves c.Timeouts as the server runs them (see
// Config.Timeouts): no frame default for Raw without HandlerMarks, and no
// keepalive default for Raw. A Raw keepalive left to its default stays 0,
// which idle leaves off for a connection without a probe, so that New asks
// for a Prober only when KeepaliveTime is set.
func (c *Config) timeouts() (idle.Config, error) {
	t := c.Timeouts
	raw := c.Protocol == Raw
	if raw && t.KeepaliveTime == 0 {
		t.KeepaliveTime = Off
	}
	if raw && !c.HandlerMarks && t.FrameTimeout == 0 {
		t.FrameTimeout = Off
	}
	r, err := t.WithDefaults(true)
	if raw && r.KeepaliveTime < 0 {
		r.KeepaliveTime, r.KeepaliveTimeout, r.KeepaliveCount = 0, 0, 0
	}
	return r, err
}

// DefaultConfig returns the Config that the zero values of a Config for
// protocol p stand for, spelled out (Config{Protocol: p}.WithDefaults()):
// the embedder's starting point, safe for production as it is. Set Addr,
// change what you need, and turn a protection off with Off. Its Timeouts are idle's defaults (handshake
// 10 s, idle 5 min, write stall 30 s, max age 1 h +/- 6 min and, Framed,
// frame 30 s and keepalive 30 s + 10 s); its Limits are the Default*
// limits; Framed, its Retransmit holds retransmit's defaults. EventLoops and
// MaxConns stay 0, decided at Start (GOMAXPROCS-1 loops; MaxConns derived
// from the open-file limit, see MaxConns). cmd/echo's flags default to it.
func DefaultConfig(p Protocol) Config {
	c, err := Config{Protocol: p}.WithDefaults()
	if err != nil {
		panic(err) // only for a Protocol that is neither Raw nor Framed
	}
	return c
}

// WithDefaults returns c as New runs it, or New's configuration error but
// for Addr, which it does not check: every zero field that has a default
// replaced by it, and every protection that is off left Off (Limits'
// OutputSoft and OutputSoftFor both Off when either is). EventLoops and
// MaxConns are left as they are, their zero decided at Start. A resolved
// Config resolves to itself. It may be called from any goroutine.
func (c Config) WithDefaults() (Config, error) {
	if err := c.check(); err != nil {
		return c, err
	}
	c.Tick = cmp.Or(c.Tick, wheel.DefaultTick)
	c.MaxFrame = cmp.Or(c.MaxFrame, frame.DefaultMax)
	l := &c.Limits
	or := func(v, def int) int {
		if v < 0 {
			return Off
		}
		return cmp.Or(v, def)
	}
	l.OutputHard = or(l.OutputHard, DefaultOutputHard)
	l.OutputSoft = or(l.OutputSoft, DefaultOutputSoft)
	l.OutputSoftFor = time.Duration(or(int(l.OutputSoftFor), int(DefaultOutputSoftFor)))
	if l.OutputSoft < 0 || l.OutputSoftFor < 0 {
		l.OutputSoft, l.OutputSoftFor = Off, Off
	}
	if c.Protocol == Framed {
		l.UnackedBytes = or(l.UnackedBytes, DefaultUnackedBytes)
		l.PingsPerSecond = or(l.PingsPerSecond, DefaultPingsPerSecond)
		r := &c.Retransmit
		r.InitialRTO = cmp.Or(r.InitialRTO, retransmit.DefaultInitialRTO)
		r.MinRTO = cmp.Or(r.MinRTO, retransmit.DefaultMinRTO)
		r.MaxRTO = cmp.Or(r.MaxRTO, retransmit.DefaultMaxRTO)
		r.Granularity = cmp.Or(r.Granularity, c.Tick)
		r.MaxRetransmits = or(r.MaxRetransmits, retransmit.DefaultMaxRetransmits)
		r.GiveUpAfter = time.Duration(or(int(r.GiveUpAfter), int(retransmit.DefaultGiveUpAfter)))
		r.Window = cmp.Or(r.Window, retransmit.DefaultWindow)
	}
	return c, nil
}

// outputLook is how often queued output is looked at: a quarter of the
// shorter of the write-stall timeout and OutputSoftFor (0: never, neither is
// on), so either closes at most a quarter late.
func outputLook(stall, softFor time.Duration) time.Duration {
	d := time.Duration(0)
	for _, t := range []time.Duration{stall, softFor} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d / 4
}

// metricName matches a Prometheus metric or label name (without colons).
var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
