package netserver

import (
	"fmt"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/setting"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/wheel"
)

// DefaultConfig returns the Config that the zero values of a Config for
// protocol p stand for, spelled out (Config{Protocol: p}.WithDefaults()):
// the embedder's starting point, safe for production as it is. Set Addr,
// change what you need, and turn a protection off with Off. Each field's
// doc says its default; EventLoops, MaxConns and MaxConnsPerSource stay 0,
// decided at Start. cmd/echo's flags default to it.
func DefaultConfig(p Protocol) Config {
	c, err := Config{Protocol: p}.WithDefaults()
	if err != nil {
		panic(err) // only for a Protocol that is neither Raw nor Framed
	}
	return c
}

// WithDefaults returns c as New runs it, or New's configuration error but
// for Addr, which it does not check. Every zero field that has a default
// is replaced by it, the layers below resolving their own (wheel.ResolveTick,
// idle.Config.WithDefaults, retransmit.Config.WithDefaults with the tick);
// every protection that is off is left Off (Limits' OutputSoft and
// OutputSoftFor both Off when either is). A zero setting the protocol does
// not use stays zero, and takes its default once used: with Raw,
// Timeouts.KeepaliveTime (a Prober's), Timeouts.FrameTimeout without
// HandlerMarks, Retransmit, Limits.UnackedBytes and PingsPerSecond.
// EventLoops and MaxConns are left as they are, their zero decided at
// Start. c itself is not changed, and the result resolves to itself. It
// reads the open-file limit and the number of CPUs; any goroutine.
func (c Config) WithDefaults() (Config, error) {
	if err := c.check(); err != nil {
		return c, err
	}
	var err error
	if c.Tick, err = wheel.ResolveTick(c.Tick); err != nil {
		return c, fmt.Errorf("%w: Tick: %w", ErrConfig, err)
	}
	framed := c.Protocol == Framed
	uses := idle.Uses{Probe: framed, Frames: framed || c.HandlerMarks, Handshake: true, Tick: c.Tick}
	if c.Timeouts, err = c.Timeouts.WithDefaults(uses); err != nil {
		return c, fmt.Errorf("%w: Timeouts: %w", ErrConfig, err)
	}
	if err := setting.CheckTick("Limits.OutputSoftFor", c.Limits.OutputSoftFor, c.Tick); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.MaxFrame = setting.Or(c.MaxFrame, frame.DefaultMax)
	c.SourceIPv4Bits = setting.Or(c.SourceIPv4Bits, DefaultSourceIPv4Bits)
	c.SourceIPv6Bits = setting.Or(c.SourceIPv6Bits, DefaultSourceIPv6Bits)
	c.MetricsNamespace = setting.Or(c.MetricsNamespace, DefaultMetricsNamespace)
	c.Limits = c.Limits.withDefaults(framed)
	if framed {
		if c.Retransmit, err = c.Retransmit.WithDefaults(c.Tick); err != nil {
			return c, fmt.Errorf("%w: Retransmit: %w", ErrConfig, err)
		}
	}
	return c, c.fits()
}
