package netserver

import (
	"cmp"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

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
// frame 30 s and keepalive 30 s + 10 s; Raw leaves FrameTimeout 0, the
// default request deadline once HandlerMarks is set); its Limits are the Default*
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
// Config resolves to itself. A Raw Config without HandlerMarks keeps a
// zero FrameTimeout as it is: it has no requests to time, and HandlerMarks
// set later still gets the default request deadline. It may be called from
// any goroutine.
func (c Config) WithDefaults() (Config, error) {
	frameZero := c.Timeouts.FrameTimeout == 0
	if err := c.check(); err != nil {
		return c, err
	}
	if c.Protocol == Raw && !c.HandlerMarks && frameZero {
		c.Timeouts.FrameTimeout = 0
	}
	c.Tick = cmp.Or(c.Tick, wheel.DefaultTick)
	c.withEdgeDefaults()
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
