package netserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/setting"
	"github.com/netwheel/netwheel/retransmit"
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

var protocolNames = [...]string{Raw: "raw", Framed: "framed"}

func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ParseProtocol parses "raw" or "framed".
func ParseProtocol(s string) (Protocol, error) {
	if i := slices.Index(protocolNames[:], s); i >= 0 {
		return Protocol(i), nil
	}
	return 0, fmt.Errorf("%w: protocol %q: want raw or framed", ErrConfig, s)
}

// ErrConfig is wrapped by every configuration error New returns.
var ErrConfig = errors.New("netserver: invalid config")

// Off turns a setting off. It is exactly -1, an untyped constant that fits
// a count and a duration alike; any other negative value is an error.
const Off = setting.Off

// DefaultMetricsNamespace is the prefix of the metrics' names when
// Config.MetricsNamespace is empty.
const DefaultMetricsNamespace = "netwheel"

// MaxEventLoopsPerCore bounds Config.EventLoops: each loop is a thread that
// holds a P while it waits, so loops beyond a few per core only add threads
// and wake-ups, and push the timer wheel off the CPUs.
const MaxEventLoopsPerCore = 4

// Config configures a Server. Every field follows one rule, as in idle's
// and retransmit's Configs, which it holds: zero means the default the
// field documents, Off (exactly -1) turns a protection off, and any other
// negative value is an error naming the field; a setting that cannot be
// off (a size, a tick) says so, and refuses Off too. A timeout shorter
// than the tick is refused: the wheel cannot keep it. The zero Config but
// for Addr is therefore the safe one: every timeout and limit is on.
// DefaultConfig spells those defaults out, WithDefaults resolves a
// Config, and Validate and New check the whole and say what is wrong.
type Config struct {
	// Addr is the TCP address to listen on, host:port. Port 0 picks a free
	// port; Server.Addr reports it.
	Addr string
	// Protocol is Raw (the zero value) or Framed.
	Protocol Protocol
	// EventLoops is the number of gnet event loops; 0 means GOMAXPROCS-1,
	// at least 1. It cannot be off, nor exceed MaxEventLoopsPerCore per
	// CPU (runtime.NumCPU). Each loop holds a P while it waits in
	// epoll_wait, so with a loop on every P (EventLoops >= GOMAXPROCS, or
	// GOMAXPROCS 1) the wheel's timer runs late: Start logs a warning and
	// reaps come later (docs/perf.md, "Wake-ups when event loops hold every
	// P"). To keep a loop per core, run with GOMAXPROCS one above the core
	// count, as cmd/echo does (docs/design.md, "One loop per core").
	EventLoops int
	// ReusePort lets several servers (processes of the same user) share
	// the address, and the kernel balance connections between them. On
	// Linux each event loop listens on a SO_REUSEPORT socket of its own
	// either way (so that a connection flood is refused in the accept
	// that takes each connection, see docs/design.md); without ReusePort,
	// Start first makes sure nobody else listens on the address and fails
	// with "address already in use" as a single listener would.
	ReusePort bool
	// Tick is the timer wheel's resolution; 0 means wheel.DefaultTick
	// (1ms), as in wheel.WithTick. A timeout fires
	// at the first tick at or after its deadline, so it comes half a tick
	// late on average. The event loops arm their timers from exact times,
	// so a finer tick costs nothing while traffic flows; it costs wake-ups
	// (and CPU) when many timers fall due at once. It cannot be off.
	Tick time.Duration
	// Timeouts are the per-connection timeouts; zero fields take idle's
	// defaults (idle.Config). The keepalive default applies with Framed
	// only (a Raw handler that implements Prober may set KeepaliveTime); the
	// frame default with Framed, and with Raw and HandlerMarks, where it is
	// the per-request deadline. The handshake deadline runs until the first
	// complete frame (Framed) or the first byte (Raw). Write stall means no
	// queued byte drained and, on Linux, no byte acknowledged by the peer
	// (TCP_INFO): a peer that keeps reading, however slowly, is never closed
	// by it; Limits bound how much may queue meanwhile.
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
	// or unlimited there is no bound. Off means no bound; the server then
	// depends on the open-file limit never being reached. A bound above the
	// open-file limit is refused: descriptors would run out first.
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
	// logged with its reason: at debug level for a normal end (the peer, the
	// handler or the server closed it; idle; max age), at info for a timeout
	// that found the peer gone or too slow, at warn for a broken protocol, a
	// limit crossed or an error.
	Logger *slog.Logger
	// Registerer, if not nil, also receives the server's Prometheus
	// metrics (MetricsHandler serves them either way).
	Registerer prometheus.Registerer
	// MetricsNamespace prefixes every metric's name; "" means
	// DefaultMetricsNamespace (netwheel_connections_open). MetricsLabels are constant labels put on
	// every metric, so that several servers can share one Registerer
	// (say {"server": "api"} and {"server": "admin"}); a label named
	// "reason" is taken by the close counters.
	MetricsNamespace string
	MetricsLabels    prometheus.Labels

	// ProxyProtocol is ProxyOff (the zero value) or ProxyRequired: every
	// connection must then come from a peer in TrustedProxies (a balancer)
	// and start with a PROXY protocol header, version 1 or 2, which names
	// the client (Conn.ClientAddr). It is parsed on the event loop from
	// the connection's first bytes, within Timeouts.HandshakeTimeout,
	// before the protocol sees any byte and before the handler's OnOpen. A
	// peer outside TrustedProxies is closed at once with
	// ReasonProxyUntrusted; first bytes that are no header close with
	// ReasonProxyMissing, a header that breaks the specification with
	// ReasonProxyInvalid, one over proxyproto's bound (107 bytes for
	// version 1, 2048 for version 2) with ReasonProxyTooLarge.
	ProxyProtocol ProxyMode
	// TrustedProxies are the peers a PROXY header is accepted from; it
	// must be set with ProxyRequired, and only then. An IPv4 peer matches
	// an IPv4 prefix, or one written IPv4-mapped (::ffff:10.0.0.0/104).
	TrustedProxies []netip.Prefix
	// MaxConnsPerSource bounds the connections one source may hold open,
	// counted across every event loop; a connection beyond it is closed at
	// once with ReasonSourceLimit (Framed: a CLOSE frame saying so). A
	// source is the client's address (the PROXY header's, or the peer's)
	// cut to SourceIPv4Bits or SourceIPv6Bits. A loopback peer without a
	// PROXY header is not counted (the host's own proxy or load test, with
	// any number of clients behind it); a client a header names is. 0, the
	// default, is a tenth of MaxConns as Start resolves it, at least 1
	// (DefaultMaxConnsPerSource where MaxConns has no bound): ten sources
	// are needed to fill the server, while an office or carrier NAT behind
	// one address still gets thousands of connections at the MaxConns an
	// open-file limit of a few tens of thousands gives. Off turns the bound
	// off. The counts cost O(1) per open and close, and memory per source
	// present.
	MaxConnsPerSource int
	// SourceIPv4Bits and SourceIPv6Bits are how much of a client's address
	// names its source: 0 means 32 (the address) and 64 (the site's /64,
	// since a host may hold any number of addresses in it). They cannot be
	// off.
	SourceIPv4Bits int
	SourceIPv6Bits int
}

// KernelConfig are the kernel's TCP backstops: they catch dead peers even if
// the process stalls. A zero field means the default, which is the system's
// setting (the server sets nothing); what that means is said per field.
// They cannot be off, nor negative.
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
