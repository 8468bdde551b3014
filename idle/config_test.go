package idle_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/idle/idleconn"
	"github.com/netwheel/netwheel/wheel"
)

func TestConfig_Validate(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name    string
		cfg     idle.Config
		wantErr error  // nil: valid
		field   string // must appear in the message
	}{
		{name: "zero is valid: the defaults", cfg: idle.Config{}},
		{name: "everything off", cfg: only(idle.Config{})},
		{name: "everything on", cfg: idle.Config{IdleTimeout: 5 * time.Minute, ReadSilenceTimeout: time.Minute,
			KeepaliveTime: 30 * s, KeepaliveTimeout: 10 * s, KeepaliveCount: 3, FrameTimeout: 10 * s,
			HandshakeTimeout: 5 * s, MaxAge: time.Hour, MaxAgeJitter: 6 * time.Minute, MaxAgeGrace: time.Minute,
			WriteStallTimeout: 30 * s}},
		{name: "Off turns a duration off", cfg: idle.Config{IdleTimeout: idle.Off, ReadSilenceTimeout: idle.Off, FrameTimeout: idle.Off,
			WriteStallTimeout: idle.Off, HandshakeTimeout: idle.Off, KeepaliveTime: idle.Off, MaxAge: idle.Off}},
		{name: "Off grace is none", cfg: idle.Config{MaxAge: s, MaxAgeGrace: idle.Off}},
		{name: "any other negative is a typo", cfg: idle.Config{IdleTimeout: -5 * s}, wantErr: idle.ErrNegative,
			field: "IdleTimeout -5s is negative: 0 means the default, -1 (Off) turns it off"},
		{name: "a negative second is not Off", cfg: idle.Config{FrameTimeout: -s}, wantErr: idle.ErrNegative, field: "FrameTimeout -1s"},
		{name: "negative grace", cfg: idle.Config{MaxAge: s, MaxAgeGrace: -2}, wantErr: idle.ErrNegative, field: "MaxAgeGrace"},
		{name: "negative jitter", cfg: idle.Config{MaxAgeJitter: -time.Minute}, wantErr: idle.ErrNegative, field: "MaxAgeJitter"},
		{name: "negative count", cfg: idle.Config{KeepaliveTime: s, KeepaliveTimeout: s, KeepaliveCount: -1},
			wantErr: idle.ErrNegative, field: "KeepaliveCount -1 is negative: 0 means the default, and it cannot be off"},
		{name: "keepalive timeout with keepalive off", cfg: idle.Config{KeepaliveTime: idle.Off, KeepaliveTimeout: s},
			wantErr: idle.ErrKeepalive, field: "KeepaliveTimeout"},
		{name: "keepalive count with keepalive off", cfg: idle.Config{KeepaliveTime: idle.Off, KeepaliveCount: 3},
			wantErr: idle.ErrKeepalive, field: "KeepaliveCount"},
		{name: "keepalive time with its timeout off", cfg: idle.Config{KeepaliveTime: s, KeepaliveTimeout: idle.Off},
			wantErr: idle.ErrKeepalive, field: "KeepaliveTimeout"},
		{name: "keepalive timeout alone takes the default time", cfg: idle.Config{KeepaliveTimeout: s}},
		{name: "probe never sent: read silence closes first", cfg: idle.Config{ReadSilenceTimeout: 10 * s,
			KeepaliveTime: 10 * s, KeepaliveTimeout: s}, wantErr: idle.ErrKeepalive, field: "ReadSilenceTimeout"},
		{name: "the default keepalive time is left off above read silence", cfg: idle.Config{ReadSilenceTimeout: 10 * s}},
		{name: "probe time just below read silence is fine", cfg: idle.Config{ReadSilenceTimeout: 10 * s,
			KeepaliveTime: 10*s - 1, KeepaliveTimeout: s}},
		{name: "keepalive time above idle is fine (pongs are not activity)", cfg: idle.Config{IdleTimeout: s,
			KeepaliveTime: 10 * s, KeepaliveTimeout: s}},
		{name: "jitter with max age off", cfg: idle.Config{MaxAge: idle.Off, MaxAgeJitter: s}, wantErr: idle.ErrNoEffect, field: "MaxAgeJitter"},
		{name: "grace with max age off", cfg: idle.Config{MaxAge: idle.Off, MaxAgeGrace: s}, wantErr: idle.ErrNoEffect, field: "MaxAgeGrace"},
		{name: "jitter not below max age", cfg: idle.Config{MaxAge: s, MaxAgeJitter: s}, wantErr: idle.ErrMaxAge, field: "MaxAgeJitter"},
		{name: "jitter not below the default max age", cfg: idle.Config{MaxAgeJitter: time.Hour}, wantErr: idle.ErrMaxAge, field: "MaxAgeJitter"},
		{name: "frame deadline beyond the longest life", cfg: idle.Config{MaxAge: 10 * s, MaxAgeJitter: s,
			MaxAgeGrace: s, FrameTimeout: 12 * s}, wantErr: idle.ErrNoEffect, field: "FrameTimeout"},
		{name: "frame deadline just inside the longest life", cfg: idle.Config{MaxAge: 10 * s, MaxAgeJitter: s,
			MaxAgeGrace: s, FrameTimeout: 12*s - 1}},
		{name: "idle beyond max age", cfg: idle.Config{MaxAge: 10 * s, IdleTimeout: time.Minute},
			wantErr: idle.ErrNoEffect, field: "IdleTimeout"},
		{name: "handshake beyond max age", cfg: idle.Config{MaxAge: 10 * s, HandshakeTimeout: 10 * s},
			wantErr: idle.ErrNoEffect, field: "HandshakeTimeout"},
		{name: "write stall beyond max age", cfg: idle.Config{MaxAge: 10 * s, WriteStallTimeout: 11 * s},
			wantErr: idle.ErrNoEffect, field: "WriteStallTimeout"},
		{name: "default timeouts beyond a short max age are left off", cfg: idle.Config{MaxAge: 10 * s}},
		{name: "a timeout beyond the default max age leaves it off", cfg: idle.Config{IdleTimeout: 2 * time.Hour}},
		{name: "keepalive timeout may exceed max age", cfg: idle.Config{MaxAge: 10 * s, KeepaliveTime: s,
			KeepaliveTimeout: 20 * s}},
		{name: "huge values do not overflow", cfg: idle.Config{MaxAge: 1<<63 - 1, MaxAgeJitter: 1 << 62, MaxAgeGrace: 1 << 62,
			IdleTimeout: 1<<63 - 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.field)
			assert.Regexp(t, "^idle: ", err.Error())
		})
	}
}

// only returns c with every timeout it leaves zero turned off: the
// configuration most tests here are about, in which only what a test sets
// is on.
func only(c idle.Config) idle.Config {
	for _, p := range []*time.Duration{&c.IdleTimeout, &c.ReadSilenceTimeout, &c.KeepaliveTime,
		&c.KeepaliveTimeout, &c.FrameTimeout, &c.HandshakeTimeout, &c.MaxAge, &c.WriteStallTimeout} {
		if *p == 0 {
			*p = idle.Off
		}
	}
	return c
}

func TestConfig_WithDefaults(t *testing.T) {
	const s = time.Second
	all := idle.Config{IdleTimeout: idle.DefaultIdleTimeout, ReadSilenceTimeout: idle.Off,
		KeepaliveTime: idle.DefaultKeepaliveTime, KeepaliveTimeout: idle.DefaultKeepaliveTimeout, KeepaliveCount: 1,
		FrameTimeout: idle.DefaultFrameTimeout, HandshakeTimeout: idle.DefaultHandshakeTimeout,
		MaxAge: idle.DefaultMaxAge, MaxAgeJitter: idle.DefaultMaxAgeJitter, WriteStallTimeout: idle.DefaultWriteStallTimeout}
	noKeepalive := all
	noKeepalive.KeepaliveTime, noKeepalive.KeepaliveTimeout, noKeepalive.KeepaliveCount = idle.Off, idle.Off, 0
	unused := all // keepalive, frame and handshake defaults left for the caller that uses them
	unused.KeepaliveTime, unused.KeepaliveTimeout, unused.KeepaliveCount, unused.FrameTimeout, unused.HandshakeTimeout = 0, 0, 0, 0, 0
	probe := idle.UsesAll
	tests := []struct {
		name  string
		cfg   idle.Config
		probe idle.Uses
		want  idle.Config
	}{
		{name: "zero: every default", cfg: idle.Config{}, probe: probe, want: all},
		{name: "zero without a probe: no keepalive, left for a probe", cfg: idle.Config{},
			probe: idle.Uses{Frames: true, Handshake: true},
			want: func() idle.Config {
				c := unused
				c.FrameTimeout, c.HandshakeTimeout = all.FrameTimeout, all.HandshakeTimeout
				return c
			}()},
		{name: "nothing used: those defaults stay zero", cfg: idle.Config{}, want: unused},
		{name: "one field set, the rest default", cfg: idle.Config{IdleTimeout: 30 * s}, probe: probe,
			want: func() idle.Config { c := all; c.IdleTimeout = 30 * s; return c }()},
		{name: "off stays off", cfg: idle.Config{IdleTimeout: idle.Off, MaxAge: idle.Off, KeepaliveTime: idle.Off}, probe: probe,
			want: func() idle.Config {
				c := noKeepalive
				c.IdleTimeout, c.MaxAge, c.MaxAgeJitter = idle.Off, idle.Off, 0
				return c
			}()},
		{name: "a max age set has no default jitter; longer defaults are off", cfg: idle.Config{MaxAge: 20 * s}, probe: probe,
			want: idle.Config{IdleTimeout: idle.Off, ReadSilenceTimeout: idle.Off, KeepaliveTime: idle.Off,
				KeepaliveTimeout: idle.Off, FrameTimeout: idle.Off, HandshakeTimeout: 10 * s, MaxAge: 20 * s,
				WriteStallTimeout: idle.Off}},
		{name: "a timeout beyond the default max age turns it off", cfg: idle.Config{IdleTimeout: 2 * time.Hour}, probe: probe,
			want: func() idle.Config {
				c := all
				c.IdleTimeout, c.MaxAge, c.MaxAgeJitter = 2*time.Hour, idle.Off, 0
				return c
			}()},
		{name: "keepalive default left off above read silence", cfg: idle.Config{ReadSilenceTimeout: 20 * s}, probe: probe,
			want: func() idle.Config { c := noKeepalive; c.ReadSilenceTimeout = 20 * s; return c }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.WithDefaults(tt.probe)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := got.WithDefaults(tt.probe)
			require.NoError(t, err)
			assert.Equal(t, got, again, "a resolved Config resolves to itself")
		})
	}
}

// The zero Config runs the defaults, not just resolves to them: a Tracker
// closes a connection whose handshake never completes at
// DefaultHandshakeTimeout, probes at DefaultKeepaliveTime when it has a
// probe to send, and closes an idle one at DefaultIdleTimeout; a wrapped
// Conn, whose handshake nothing marks, has no handshake deadline.
func TestConfig_ZeroRunsTheDefaults(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	var events []string
	record := func(what string) { events = append(events, clk.Now().String()+" "+what) }

	silent, err := idle.NewTracker(w, idle.Config{}, idle.Hooks{Close: func(r idle.Reason) { record("silent closed: " + r.String()) }})
	require.NoError(t, err)
	defer silent.Stop()
	talking, err := idle.NewTracker(w, idle.Config{}, idle.Hooks{
		Close: func(r idle.Reason) { record("talking closed: " + r.String()) },
		Probe: func() { record("probe") },
	})
	require.NoError(t, err)
	defer talking.Stop()
	talking.HandshakeDone()
	client, server := net.Pipe()
	defer client.Close()
	wrapped, err := idleconn.WrapConn(server, w, idle.Config{})
	require.NoError(t, err)
	defer wrapped.Close()

	clk.Advance(idle.DefaultHandshakeTimeout)
	assert.Equal(t, []string{"10s silent closed: handshake"}, events)
	assert.Equal(t, idle.ReasonNone, wrapped.Tracker().Reason(), "no handshake deadline on a wrapped Conn")
	clk.Advance(idle.DefaultKeepaliveTime - idle.DefaultHandshakeTimeout)
	assert.Equal(t, "30s probe", events[len(events)-1])
	for clk.Now() < idle.DefaultIdleTimeout {
		talking.BytesIn() // each answer: a sign of life, not activity
		clk.Advance(idle.DefaultKeepaliveTime)
	}
	assert.Contains(t, events, "5m0s talking closed: idle")
	for _, e := range events {
		assert.NotContains(t, e, "closed: keepalive", "the answered probes keep it alive")
	}
	assert.Equal(t, idle.ReasonIdle, wrapped.Tracker().Reason())
}

// A deadline finer than the wheel's tick cannot be kept: New refuses it,
// naming the field, where Validate, which knows no wheel, cannot.
func TestNew_TimeoutBelowTick(t *testing.T) {
	w := wheel.New(wheel.WithClock(wheel.NewManualClock()))
	defer w.Stop()
	cfg := idle.Config{FrameTimeout: time.Nanosecond}
	require.NoError(t, cfg.Validate())
	_, err := idle.NewTracker(w, cfg, idle.Hooks{Close: func(idle.Reason) {}})
	require.ErrorIs(t, err, idle.ErrTooShort)
	assert.EqualError(t, err, "idle: timeout shorter than the tick: FrameTimeout 1ns is shorter than the timer wheel's tick 1ms, the finest deadline it can keep")
	tr, err := idle.NewTracker(w, idle.Config{FrameTimeout: wheel.DefaultTick}, idle.Hooks{Close: func(idle.Reason) {}})
	require.NoError(t, err, "one tick is a deadline the wheel keeps")
	tr.Stop()
}
