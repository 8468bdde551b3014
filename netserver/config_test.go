package netserver_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/fdlimit"
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
	srv, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0"}, netserver.Echo{})
	require.NoError(t, err)
	assert.Negative(t, srv.TrackerConfig().FrameTimeout, "a Raw server without HandlerMarks runs no frame deadline")
	srv, err = netserver.New(netserver.Config{Addr: "127.0.0.1:0", HandlerMarks: true}, netserver.Echo{})
	require.NoError(t, err)
	assert.Equal(t, idle.DefaultFrameTimeout, srv.TrackerConfig().FrameTimeout)
}

// One rule for every field: Off (exactly -1) turns a protection off, any
// other negative value is an error naming the field and the rule, and
// what cmd/echo would refuse (a deadline finer than the tick, more event
// loops than the CPUs carry, a bound above the open-file limit) the
// library refuses, with the words cmd/echo prints.
func TestConfig_TheRule(t *testing.T) {
	const rule = "is negative: 0 means the default, -1 (Off) turns it off"
	cores := runtime.NumCPU()
	tests := []struct {
		name string
		cfg  netserver.Config
		want string // "" for a valid Config
	}{
		{name: "idle typo", cfg: netserver.Config{Timeouts: idle.Config{IdleTimeout: -5 * time.Second}},
			want: "netserver: invalid config: Timeouts: idle: negative setting: IdleTimeout -5s " + rule},
		{name: "idle off", cfg: netserver.Config{Timeouts: idle.Config{IdleTimeout: idle.Off}}},
		{name: "max conns typo", cfg: netserver.Config{MaxConns: -5}, want: "netserver: invalid config: MaxConns -5 " + rule},
		{name: "max conns off", cfg: netserver.Config{MaxConns: netserver.Off}},
		{name: "limit typo", cfg: netserver.Config{Limits: netserver.Limits{OutputHard: -2}}, want: "Limits.OutputHard -2 " + rule},
		{name: "soft-for typo", cfg: netserver.Config{Limits: netserver.Limits{OutputSoftFor: -time.Second}}, want: "Limits.OutputSoftFor -1s " + rule},
		{name: "retransmit typo", cfg: netserver.Config{Protocol: netserver.Framed, Retransmit: retransmit.Config{MaxRetransmits: -3}},
			want: "netserver: invalid config: Retransmit: retransmit: invalid config: MaxRetransmits -3 " + rule},
		{name: "event loops off", cfg: netserver.Config{EventLoops: netserver.Off},
			want: "EventLoops -1 is negative: 0 means the default, and it cannot be off"},
		{name: "max frame off", cfg: netserver.Config{MaxFrame: netserver.Off}, want: "MaxFrame -1 is negative"},
		{name: "kernel negative", cfg: netserver.Config{Kernel: netserver.KernelConfig{UserTimeout: -time.Second}}, want: "Kernel.UserTimeout -1s is negative"},
		{name: "tick zero is the default", cfg: netserver.Config{Tick: 0}},
		{name: "tick off", cfg: netserver.Config{Tick: netserver.Off}, want: "Tick: wheel: tick out of range"},
		{name: "frame deadline below the tick", cfg: netserver.Config{Protocol: netserver.Framed, Timeouts: idle.Config{FrameTimeout: time.Nanosecond}},
			want: "netserver: invalid config: Timeouts: idle: timeout shorter than the tick: FrameTimeout 1ns is shorter than the timer wheel's tick 1ms, the finest deadline it can keep"},
		{name: "deadline of one tick", cfg: netserver.Config{Protocol: netserver.Framed, Tick: 10 * time.Millisecond, Timeouts: idle.Config{FrameTimeout: 10 * time.Millisecond}}},
		{name: "soft-for below the tick", cfg: netserver.Config{Limits: netserver.Limits{OutputSoftFor: time.Microsecond}}, want: "Limits.OutputSoftFor 1µs is shorter than the timer wheel's tick"},
		{name: "event loops beyond the cores", cfg: netserver.Config{EventLoops: netserver.MaxEventLoopsPerCore*cores + 1},
			want: fmt.Sprintf("EventLoops %d is beyond 4 per core (%d here): more loops only add threads", 4*cores+1, 4*cores)},
		{name: "event loops at the bound", cfg: netserver.Config{EventLoops: netserver.MaxEventLoopsPerCore * cores}},
	}
	if files := fdlimit.OpenFiles(); files > 0 && files < 1e9 {
		tests = append(tests, struct {
			name string
			cfg  netserver.Config
			want string
		}{name: "max conns above the open-file limit", cfg: netserver.Config{MaxConns: 1e9},
			want: fmt.Sprintf("MaxConns 1000000000 is above the open-file limit %d: the server would run out of descriptors before the bound", files)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Addr = "127.0.0.1:0"
			_, err := netserver.New(tt.cfg, netserver.Echo{})
			if tt.want == "" {
				require.NoError(t, err)
				require.NoError(t, tt.cfg.Validate())
				return
			}
			require.ErrorIs(t, err, netserver.ErrConfig)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, err, tt.cfg.Validate(), "Validate says what New says")
			_, err = tt.cfg.WithDefaults()
			assert.ErrorIs(t, err, netserver.ErrConfig)
		})
	}
}

// WithDefaults does not change the Config it is given, and DefaultConfig
// is WithDefaults of the zero Config, for either protocol.
func TestConfig_WithDefaultsKeepsItsInput(t *testing.T) {
	for _, p := range []netserver.Protocol{netserver.Raw, netserver.Framed} {
		c := netserver.Config{Protocol: p, Timeouts: idle.Config{IdleTimeout: time.Minute}, Limits: netserver.Limits{OutputSoft: netserver.Off}}
		before := c
		r, err := c.WithDefaults()
		require.NoError(t, err)
		assert.Equal(t, before, c)
		assert.NotEqual(t, c, r)
		zero, err := netserver.Config{Protocol: p}.WithDefaults()
		require.NoError(t, err)
		assert.Equal(t, netserver.DefaultConfig(p), zero, "%v", p)
	}
}
