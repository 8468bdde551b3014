package netserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/frame"
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

// Config configures a Server. The zero value of every field but Addr is
// usable and documented; New validates the whole and says what is wrong.
type Config struct {
	// Addr is the TCP address to listen on, host:port. Port 0 picks a free
	// port; Server.Addr reports it.
	Addr string
	// Protocol is Raw (the zero value) or Framed.
	Protocol Protocol
	// EventLoops is the number of gnet event loops; 0 means GOMAXPROCS-1,
	// at least 1. Each loop waits in epoll_wait holding a P (the Go
	// scheduler's processor), and a runtime timer on a P held that way
	// runs only when the runtime takes the P back, up to about 20 ms late;
	// the timer wheel's goroutine sleeps on such a timer. With a P to spare,
	// an idle P's thread runs every P's due timers on time, and timeouts
	// fire within a tick or two. With a loop on every P (EventLoops >=
	// GOMAXPROCS, or GOMAXPROCS 1) Start logs a warning and reaps come up
	// to about 20 ms late at the tail. docs/perf.md has the figures; to keep
	// a loop per core, run with GOMAXPROCS one above the core count.
	EventLoops int
	// ReusePort sets SO_REUSEPORT, so several servers (processes) can share
	// the address and the kernel balances connections between them.
	ReusePort bool
	// Tick is the timer wheel's resolution; 0 means 1ms. A timeout fires
	// at the first tick at or after its deadline, so it comes half a tick
	// late on average. The event loops arm their timers from exact times,
	// so a finer tick costs nothing while traffic flows; it costs wake-ups
	// when many timers fall due at once (a 250µs tick halved the median
	// reap delay at 1 500 reaps a second for 8-14% more CPU during the
	// reaps; docs/perf.md).
	Tick time.Duration
	// Timeouts are the per-connection timeouts (idle, read silence,
	// keepalive, frame, handshake, max age, write stall); zero fields are
	// off. Keepalive probes need the Framed protocol. The frame deadline
	// runs from the first byte of a frame to its last (Framed), and the
	// handshake deadline until the first complete frame (Framed) or the
	// first byte (Raw). The write-stall timeout closes a connection whose
	// output has stayed queued in user space (the socket buffer being
	// full) for that long.
	Timeouts idle.Config
	// Retransmit configures RFC 6298 retransmission of the DATA frames the
	// server sends (Framed only); zero fields take retransmit's defaults.
	Retransmit retransmit.Config
	// MaxConns bounds the open connections; 0 means no bound. Connections
	// beyond it are closed at once with ReasonOverload (and, Framed, a
	// CLOSE frame saying so).
	MaxConns int
	// MaxFrame is the largest frame length accepted (Framed); 0 means
	// 64 KiB. A longer frame closes the connection with ReasonTooLarge
	// before it is read.
	MaxFrame int
	// Kernel sets the kernel's own TCP backstops on every connection.
	Kernel KernelConfig
	// SilentShutdown makes Shutdown close framed connections without
	// sending them a CLOSE frame first.
	SilentShutdown bool
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the server's Prometheus metrics; nil keeps them
	// in a registry of the server's own, served by MetricsHandler.
	Registerer prometheus.Registerer
}

// KernelConfig are the kernel's TCP backstops: they catch dead peers even if
// the process stalls. Zero fields leave the system defaults.
type KernelConfig struct {
	// KeepaliveIdle enables TCP keepalive after this long idle
	// (TCP_KEEPIDLE); KeepaliveInterval and KeepaliveCount set
	// TCP_KEEPINTVL and TCP_KEEPCNT.
	KeepaliveIdle     time.Duration
	KeepaliveInterval time.Duration
	KeepaliveCount    int
	// UserTimeout sets TCP_USER_TIMEOUT (Linux; ignored elsewhere): the
	// kernel drops the connection when sent data stays unacknowledged this
	// long.
	UserTimeout time.Duration
}

func (c *Config) validate() error {
	if c.Addr == "" {
		return fmt.Errorf("%w: Addr is empty: want host:port, e.g. 127.0.0.1:9000", ErrConfig)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("%w: Addr %q: %v", ErrConfig, c.Addr, err)
	}
	if c.Protocol != Raw && c.Protocol != Framed {
		return fmt.Errorf("%w: %v: want Raw or Framed", ErrConfig, c.Protocol)
	}
	if c.EventLoops < 0 {
		return fmt.Errorf("%w: EventLoops %d is negative", ErrConfig, c.EventLoops)
	}
	if c.Tick != 0 && (c.Tick < wheel.MinTick || c.Tick > wheel.MaxTick) {
		return fmt.Errorf("%w: Tick %v outside [%v, %v]", ErrConfig, c.Tick, wheel.MinTick, wheel.MaxTick)
	}
	if err := c.Timeouts.Validate(); err != nil {
		return fmt.Errorf("%w: Timeouts: %w", ErrConfig, err)
	}
	if c.Protocol == Raw && c.Timeouts.KeepaliveTime != 0 {
		return fmt.Errorf("%w: Timeouts.KeepaliveTime needs the framed protocol (raw has no probe to send); use Kernel.KeepaliveIdle", ErrConfig)
	}
	if c.Protocol == Raw && c.Timeouts.FrameTimeout != 0 {
		return fmt.Errorf("%w: Timeouts.FrameTimeout needs the framed protocol (raw has no frames)", ErrConfig)
	}
	if c.Protocol == Framed {
		if _, err := retransmit.NewEstimator(c.Retransmit); err != nil {
			return fmt.Errorf("%w: Retransmit: %w", ErrConfig, err)
		}
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("%w: MaxConns %d is negative", ErrConfig, c.MaxConns)
	}
	if c.MaxFrame < 0 || c.MaxFrame > 1<<30 {
		return fmt.Errorf("%w: MaxFrame %d outside [0, 1GiB]", ErrConfig, c.MaxFrame)
	}
	if c.MaxFrame != 0 && c.MaxFrame < frame.DataHeaderSize {
		return fmt.Errorf("%w: MaxFrame %d below the smallest frame", ErrConfig, c.MaxFrame)
	}
	k := c.Kernel
	if k.KeepaliveIdle < 0 || k.KeepaliveInterval < 0 || k.KeepaliveCount < 0 || k.UserTimeout < 0 {
		return fmt.Errorf("%w: Kernel settings must not be negative", ErrConfig)
	}
	if k.KeepaliveIdle == 0 && (k.KeepaliveInterval != 0 || k.KeepaliveCount != 0) {
		return fmt.Errorf("%w: Kernel.KeepaliveInterval/Count need Kernel.KeepaliveIdle", ErrConfig)
	}
	return nil
}
