package netserver

import (
	"cmp"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// validate checks c and resolves its Timeouts (see timeouts), as New needs
// them.
func (c *Config) validate() error {
	if c.Addr == "" {
		return fmt.Errorf("%w: Addr is empty: want host:port, e.g. 127.0.0.1:9000", ErrConfig)
	}
	_, port, err := net.SplitHostPort(c.Addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port) // a number in [0, 65535], or a service name
	}
	if err != nil {
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
	if err := c.checkEdge(); err != nil {
		return err
	}
	c.Timeouts = timeouts
	return nil
}

// metricName matches a Prometheus metric or label name (without colons).
var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
