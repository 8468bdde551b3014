package netserver

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"

	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/internal/setting"
	"github.com/netwheel/netwheel/netserver/frame"
)

// Validate reports whether New would accept c as a configuration: nil, or
// an error wrapping ErrConfig that names the field and says what is
// allowed. It checks what WithDefaults checks, and Addr. Any goroutine.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve is c as New runs it, Addr checked, or New's configuration error.
func (c Config) resolve() (Config, error) {
	if err := setting.CheckAddr("Addr", c.Addr); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c.WithDefaults()
}

// check validates the fields of c one by one, as given: the rule for
// negative values, and what each field allows alone, with the protocol or
// on this machine (CPUs, open-file limit). The layers below (wheel, idle,
// retransmit) check their own fields when WithDefaults resolves them.
func (c Config) check() error {
	if c.Protocol != Raw && c.Protocol != Framed {
		return fmt.Errorf("%w: %v: want Raw or Framed", ErrConfig, c.Protocol)
	}
	for _, f := range []struct {
		name string
		err  error
	}{
		{"", setting.CheckOn("EventLoops", c.EventLoops)},
		{"", setting.Check("MaxConns", c.MaxConns)},
		{"", setting.CheckOn("MaxFrame", c.MaxFrame)},
		{"Limits.", setting.Check("OutputHard", c.Limits.OutputHard)},
		{"Limits.", setting.Check("OutputSoft", c.Limits.OutputSoft)},
		{"Limits.", setting.Check("OutputSoftFor", c.Limits.OutputSoftFor)},
		{"Limits.", setting.Check("UnackedBytes", c.Limits.UnackedBytes)},
		{"Limits.", setting.Check("PingsPerSecond", c.Limits.PingsPerSecond)},
		{"Kernel.", setting.CheckOn("KeepaliveIdle", c.Kernel.KeepaliveIdle)},
		{"Kernel.", setting.CheckOn("KeepaliveInterval", c.Kernel.KeepaliveInterval)},
		{"Kernel.", setting.CheckOn("KeepaliveCount", c.Kernel.KeepaliveCount)},
		{"Kernel.", setting.CheckOn("UserTimeout", c.Kernel.UserTimeout)},
	} {
		if f.err != nil {
			return fmt.Errorf("%w: %s%w", ErrConfig, f.name, f.err)
		}
	}
	if lim := MaxEventLoopsPerCore * runtime.NumCPU(); c.EventLoops > lim {
		return fmt.Errorf("%w: EventLoops %d is beyond %d per core (%d here): more loops only add threads",
			ErrConfig, c.EventLoops, MaxEventLoopsPerCore, lim)
	}
	if files := fdlimit.OpenFiles(); files > 0 && c.MaxConns > 0 && uint64(c.MaxConns) > files {
		return fmt.Errorf("%w: MaxConns %d is above the open-file limit %d: the server would run out of descriptors before the bound (raise the limit, ulimit -n, first)",
			ErrConfig, c.MaxConns, files)
	}
	if c.Protocol == Raw && c.Timeouts.FrameTimeout > 0 && !c.HandlerMarks {
		return fmt.Errorf("%w: Timeouts.FrameTimeout needs the framed protocol, or HandlerMarks (raw has no frames; a handler marks its requests)", ErrConfig)
	}
	if c.Protocol == Framed && c.HandlerMarks {
		return fmt.Errorf("%w: HandlerMarks is for the raw protocol: framed frames mark their own activity, requests and handshake", ErrConfig)
	}
	if c.MaxFrame > 1<<30 {
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
	k := c.Kernel
	if k.KeepaliveIdle == 0 && (k.KeepaliveInterval != 0 || k.KeepaliveCount != 0) {
		return fmt.Errorf("%w: Kernel.KeepaliveInterval/Count need Kernel.KeepaliveIdle", ErrConfig)
	}
	return c.checkEdge()
}

// fits checks a resolved Framed c: one largest message must fit each
// bound, or Echo would close a polite peer for sending it.
func (c Config) fits() error {
	if c.Protocol != Framed {
		return nil
	}
	r := c.Limits.run()
	if payload := c.MaxFrame - (frame.DataHeaderSize - frame.LenSize); payload > r.unackedBytes {
		return fmt.Errorf("%w: MaxFrame %d allows %d-byte messages, above Limits.UnackedBytes %d: raise UnackedBytes or lower MaxFrame",
			ErrConfig, c.MaxFrame, payload, r.unackedBytes)
	}
	if wire := frame.LenSize + c.MaxFrame; wire > r.outputHard {
		return fmt.Errorf("%w: MaxFrame %d makes %d-byte frames, above Limits.OutputHard %d: raise OutputHard or lower MaxFrame",
			ErrConfig, c.MaxFrame, wire, r.outputHard)
	}
	return nil
}

// metricName matches a Prometheus metric or label name (without colons).
var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
