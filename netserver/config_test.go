package netserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// DefaultConfig spells out the safe defaults: the ones the zero values of
// a Config stand for, and the ones cmd/echo runs with.
func TestDefaultConfig(t *testing.T) {
	const s = time.Second
	framed := netserver.DefaultConfig(netserver.Framed)
	want := idle.Config{IdleTimeout: 5 * time.Minute, ReadSilenceTimeout: idle.Off,
		KeepaliveTime: 30 * s, KeepaliveTimeout: 10 * s, KeepaliveCount: 1, FrameTimeout: 30 * s,
		HandshakeTimeout: 10 * s, MaxAge: time.Hour, MaxAgeJitter: 6 * time.Minute, WriteStallTimeout: 30 * s}
	assert.Equal(t, want, framed.Timeouts)
	assert.Equal(t, netserver.Limits{OutputHard: 4 << 20, OutputSoft: 1 << 20, OutputSoftFor: 10 * s,
		UnackedBytes: 1 << 20, PingsPerSecond: 100}, framed.Limits)
	assert.Equal(t, retransmit.Config{InitialRTO: s, MinRTO: 200 * time.Millisecond, MaxRTO: time.Minute,
		Granularity: wheel.DefaultTick, MaxRetransmits: 10, GiveUpAfter: 30 * s, Window: 1024}, framed.Retransmit)
	assert.Equal(t, wheel.DefaultTick, framed.Tick)
	assert.Equal(t, 64<<10, framed.MaxFrame)
	assert.Zero(t, framed.MaxConns, "derived at Start")
	assert.Zero(t, framed.EventLoops, "decided at Start")

	raw := netserver.DefaultConfig(netserver.Raw)
	want.KeepaliveTime, want.KeepaliveTimeout, want.KeepaliveCount = 0, 0, 0 // raw has no probe of its own
	want.FrameTimeout = 0                                                    // nor frames: the default once HandlerMarks is set
	assert.Equal(t, want, raw.Timeouts)
	assert.Equal(t, netserver.Limits{OutputHard: 4 << 20, OutputSoft: 1 << 20, OutputSoftFor: 10 * s}, raw.Limits)
	assert.Zero(t, raw.Retransmit)
	// HandlerMarks set on Raw's defaults gets the request deadline a zero
	// Config with HandlerMarks gets.
	marked := raw
	marked.HandlerMarks = true
	fromDefaults, err := marked.WithDefaults()
	require.NoError(t, err)
	fromZero, err := netserver.Config{Protocol: netserver.Raw, HandlerMarks: true}.WithDefaults()
	require.NoError(t, err)
	assert.Equal(t, idle.DefaultFrameTimeout, fromDefaults.Timeouts.FrameTimeout)
	assert.Equal(t, fromZero.Timeouts, fromDefaults.Timeouts)

	for _, c := range []netserver.Config{framed, raw} {
		c.Addr = "127.0.0.1:0"
		srv, err := netserver.New(c, netserver.Echo{})
		require.NoError(t, err, "%v", c.Protocol)
		require.NotNil(t, srv)
		// The zero Config runs with the same timeouts.
		zero, err := netserver.Resolve(netserver.Config{Addr: c.Addr, Protocol: c.Protocol})
		require.NoError(t, err)
		run, err := netserver.Resolve(c)
		require.NoError(t, err)
		assert.Equal(t, run.Timeouts, zero.Timeouts, "%v", c.Protocol)
		// DefaultConfig resolves to itself.
		again, err := c.WithDefaults()
		require.NoError(t, err)
		assert.Equal(t, c, again, "%v", c.Protocol)
	}
}

// An embedder who sets one timeout keeps the safe defaults of the others,
// and turns one off with Off.
func TestConfig_ZeroIsTheDefault(t *testing.T) {
	const s = time.Second
	c, err := netserver.Resolve(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed,
		Timeouts: idle.Config{IdleTimeout: 30 * s, MaxAge: idle.Off}})
	require.NoError(t, err)
	assert.Equal(t, idle.Config{IdleTimeout: 30 * s, ReadSilenceTimeout: idle.Off,
		KeepaliveTime: 30 * s, KeepaliveTimeout: 10 * s, KeepaliveCount: 1, FrameTimeout: 30 * s,
		HandshakeTimeout: 10 * s, MaxAge: idle.Off, WriteStallTimeout: 30 * s}, c.Timeouts)

	// Off is accepted wherever a protection can be off, by either protocol.
	for _, p := range []netserver.Protocol{netserver.Raw, netserver.Framed} {
		off := netserver.Config{Addr: "127.0.0.1:0", Protocol: p, MaxConns: netserver.Off,
			Limits:   netserver.Limits{OutputHard: netserver.Off, OutputSoft: netserver.Off, OutputSoftFor: netserver.Off, PingsPerSecond: netserver.Off},
			Timeouts: idle.Config{IdleTimeout: idle.Off, KeepaliveTime: idle.Off, FrameTimeout: idle.Off, HandshakeTimeout: idle.Off, MaxAge: idle.Off, WriteStallTimeout: idle.Off}}
		if p == netserver.Framed {
			off.Limits.UnackedBytes = netserver.Off
			off.Retransmit = retransmit.Config{MaxRetransmits: retransmit.Off, GiveUpAfter: retransmit.Off}
		}
		_, err := netserver.New(off, netserver.Echo{})
		assert.NoError(t, err, "%v", p)
		r, err := off.WithDefaults()
		require.NoError(t, err)
		assert.Equal(t, off.Limits, r.Limits, "off stays off")
		assert.Equal(t, netserver.Off, r.MaxConns)
		assert.Negative(t, r.Timeouts.IdleTimeout)
		if p == netserver.Framed {
			assert.Equal(t, retransmit.Off, r.Retransmit.MaxRetransmits)
			assert.Equal(t, time.Duration(retransmit.Off), r.Retransmit.GiveUpAfter)
			assert.Equal(t, retransmit.DefaultWindow, r.Retransmit.Window)
		}
	}
}

func TestNew_HandlerMarksNeedRaw(t *testing.T) {
	_, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Framed, HandlerMarks: true}, netserver.Echo{})
	require.ErrorIs(t, err, netserver.ErrConfig)
	assert.Contains(t, err.Error(), "HandlerMarks is for the raw protocol")
	_, err = netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: netserver.Raw, HandlerMarks: true}, netserver.Echo{})
	assert.NoError(t, err)
}

// With HandlerMarks a Raw handler marks its requests, and the frame
// default is their deadline; without, Raw has no frames and no default.
func TestConfig_RawFrameDefault(t *testing.T) {
	marks, err := netserver.Config{HandlerMarks: true}.WithDefaults()
	require.NoError(t, err)
	assert.Equal(t, idle.DefaultFrameTimeout, marks.Timeouts.FrameTimeout)
	plain, err := netserver.Config{}.WithDefaults()
	require.NoError(t, err)
	assert.Zero(t, plain.Timeouts.FrameTimeout, "left for HandlerMarks to decide")
	run, err := netserver.Resolve(netserver.Config{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	assert.Negative(t, run.Timeouts.FrameTimeout, "a Raw server without HandlerMarks runs no frame deadline")
}
