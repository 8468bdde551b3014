package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/fdlimit"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/retransmit"
)

// testOpenFiles is the open-file limit the tests parse flags under, so
// that -max-conns's default does not depend on the machine's.
const testOpenFiles = 10000

// parse is parseFlags under the open-file limit testOpenFiles.
func parse(args []string, help *bytes.Buffer) (netserver.Config, options, error) {
	return parseFlagsLimit(args, help, testOpenFiles)
}

// defaults returns what parse gives for "-proto proto" and nothing else:
// the safe defaults, written out.
func defaults(proto netserver.Protocol) (netserver.Config, options) {
	cfg := netserver.Config{
		Addr:     ":9000",
		Protocol: proto,
		MaxConns: testOpenFiles - 64 - 3*eventLoops(0),
		Timeouts: idle.Config{
			HandshakeTimeout:  10 * time.Second,
			IdleTimeout:       5 * time.Minute,
			WriteStallTimeout: 30 * time.Second,
			MaxAge:            time.Hour,
			MaxAgeJitter:      6 * time.Minute,
		},
	}
	if proto == netserver.Framed {
		cfg.Timeouts.FrameTimeout = 30 * time.Second
		cfg.Timeouts.KeepaliveTime = 30 * time.Second
		cfg.Timeouts.KeepaliveTimeout = 10 * time.Second
	}
	return cfg, options{shutdownTimeout: 10 * time.Second, logLevel: slog.LevelInfo, logFormat: "text", openFiles: testOpenFiles}
}

// wantFor returns the defaults changed by set, on the defaults of the
// protocol set leaves.
func wantFor(set func(c *netserver.Config, o *options)) (netserver.Config, options) {
	c, o := defaults(netserver.Raw)
	set(&c, &o)
	if c.Protocol == netserver.Framed {
		c, o = defaults(netserver.Framed)
		set(&c, &o)
	}
	return c, o
}

// landCases set each flag to a value unlike its default; set applies the
// same change to the defaults. Every other field must keep its default, so
// a flag bound to the wrong field fails.
var landCases = []struct {
	name string
	args []string
	set  func(c *netserver.Config, o *options)
}{
	{name: "addr", args: []string{"-addr", "127.0.0.1:7000"}, set: func(c *netserver.Config, o *options) { c.Addr = "127.0.0.1:7000" }},
	{name: "proto", args: []string{"-proto", "framed"}, set: func(c *netserver.Config, o *options) { c.Protocol = netserver.Framed }},
	{name: "proto raw", args: []string{"-proto=raw"}, set: func(c *netserver.Config, o *options) { c.Protocol = netserver.Raw }},
	{name: "event-loops", args: []string{"-event-loops", "3"}, set: func(c *netserver.Config, o *options) {
		c.EventLoops, c.MaxConns = 3, testOpenFiles-64-3*3
	}},
	{name: "reuse-port", args: []string{"-reuse-port"}, set: func(c *netserver.Config, o *options) { c.ReusePort = true }},
	{name: "reuse-port=false", args: []string{"-reuse-port=false"}, set: func(c *netserver.Config, o *options) {}},
	{name: "tick", args: []string{"-tick", "5ms"}, set: func(c *netserver.Config, o *options) { c.Tick = 5 * time.Millisecond }},
	{name: "max-conns", args: []string{"-max-conns", "100"}, set: func(c *netserver.Config, o *options) { c.MaxConns = 100 }},
	{name: "max-conns 0", args: []string{"-max-conns", "0"}, set: func(c *netserver.Config, o *options) { c.MaxConns = -1 }},
	{name: "max-frame", args: []string{"-proto", "framed", "-max-frame", "4096"}, set: func(c *netserver.Config, o *options) {
		c.Protocol, c.MaxFrame = netserver.Framed, 4096
	}},
	{name: "idle-timeout", args: []string{"-idle-timeout", "1m"}, set: func(c *netserver.Config, o *options) { c.Timeouts.IdleTimeout = time.Minute }},
	{name: "read-silence-timeout", args: []string{"-read-silence-timeout", "2m"}, set: func(c *netserver.Config, o *options) {
		c.Timeouts.ReadSilenceTimeout = 2 * time.Minute
	}},
	{name: "keepalive", args: []string{"-proto", "framed", "-keepalive-time", "15s", "-keepalive-timeout", "5s", "-keepalive-count", "3"},
		set: func(c *netserver.Config, o *options) {
			c.Protocol = netserver.Framed
			c.Timeouts.KeepaliveTime, c.Timeouts.KeepaliveTimeout, c.Timeouts.KeepaliveCount = 15*time.Second, 5*time.Second, 3
		}},
	{name: "frame-timeout", args: []string{"-proto", "framed", "-frame-timeout", "3s"}, set: func(c *netserver.Config, o *options) {
		c.Protocol, c.Timeouts.FrameTimeout = netserver.Framed, 3*time.Second
	}},
	{name: "handshake-timeout", args: []string{"-handshake-timeout", "4s"}, set: func(c *netserver.Config, o *options) {
		c.Timeouts.HandshakeTimeout = 4 * time.Second
	}},
	{name: "max-age", args: []string{"-max-age", "2h", "-max-age-jitter", "5m", "-max-age-grace", "30s"}, set: func(c *netserver.Config, o *options) {
		c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter, c.Timeouts.MaxAgeGrace = 2*time.Hour, 5*time.Minute, 30*time.Second
	}},
	{name: "write-stall-timeout", args: []string{"-write-stall-timeout", "6s"}, set: func(c *netserver.Config, o *options) {
		c.Timeouts.WriteStallTimeout = 6 * time.Second
	}},
	{name: "output limits", args: []string{"-output-hard", "8388608", "-output-soft", "2097152", "-output-soft-for", "5s"},
		set: func(c *netserver.Config, o *options) {
			c.Limits = netserver.Limits{OutputHard: 8 << 20, OutputSoft: 2 << 20, OutputSoftFor: 5 * time.Second}
		}},
	{name: "output limits off", args: []string{"-output-hard", "-1", "-output-soft", "-1", "-output-soft-for=-1"},
		set: func(c *netserver.Config, o *options) {
			c.Limits = netserver.Limits{OutputHard: -1, OutputSoft: -1, OutputSoftFor: -1}
		}},
	{name: "output-soft-for negative duration", args: []string{"-output-soft-for", "-2s"}, set: func(c *netserver.Config, o *options) {
		c.Limits.OutputSoftFor = -2 * time.Second
	}},
	{name: "unacked-bytes", args: []string{"-proto", "framed", "-unacked-bytes", "65536"}, set: func(c *netserver.Config, o *options) {
		c.Protocol, c.Limits.UnackedBytes = netserver.Framed, 64<<10
	}},
	{name: "pings-per-second", args: []string{"-proto", "framed", "-pings-per-second", "10"}, set: func(c *netserver.Config, o *options) {
		c.Protocol, c.Limits.PingsPerSecond = netserver.Framed, 10
	}},
	{name: "retransmit", args: []string{"-proto", "framed", "-initial-rto", "2s", "-min-rto", "100ms", "-max-rto", "20s",
		"-rto-granularity", "2ms", "-rto-variant", "linux", "-max-retransmits", "7", "-give-up-after", "45s", "-window", "64"},
		set: func(c *netserver.Config, o *options) {
			c.Protocol = netserver.Framed
			c.Retransmit = retransmit.Config{InitialRTO: 2 * time.Second, MinRTO: 100 * time.Millisecond, MaxRTO: 20 * time.Second,
				Granularity: 2 * time.Millisecond, Variant: retransmit.Linux, MaxRetransmits: 7, GiveUpAfter: 45 * time.Second, Window: 64}
		}},
	{name: "rto-variant rfc6298", args: []string{"-proto", "framed", "-rto-variant", "rfc6298"}, set: func(c *netserver.Config, o *options) {
		c.Protocol, c.Retransmit.Variant = netserver.Framed, retransmit.RFC6298
	}},
	{name: "tcp keepalive", args: []string{"-tcp-keepalive-idle", "30s", "-tcp-keepalive-interval", "10s", "-tcp-keepalive-count", "4"},
		set: func(c *netserver.Config, o *options) {
			c.Kernel.KeepaliveIdle, c.Kernel.KeepaliveInterval, c.Kernel.KeepaliveCount = 30*time.Second, 10*time.Second, 4
		}},
	{name: "tcp-user-timeout", args: []string{"-tcp-user-timeout", "20s"}, set: func(c *netserver.Config, o *options) {
		c.Kernel.UserTimeout = 20 * time.Second
	}},
	{name: "silent-shutdown", args: []string{"-proto", "framed", "-silent-shutdown"}, set: func(c *netserver.Config, o *options) {
		c.Protocol, c.SilentShutdown = netserver.Framed, true
	}},
	{name: "shutdown-timeout", args: []string{"-shutdown-timeout", "1m30s"}, set: func(c *netserver.Config, o *options) {
		o.shutdownTimeout = 90 * time.Second
	}},
	{name: "shutdown-timeout 0", args: []string{"-shutdown-timeout", "0"}, set: func(c *netserver.Config, o *options) { o.shutdownTimeout = 0 }},
	{name: "metrics", args: []string{"-metrics", "127.0.0.1:9100"}, set: func(c *netserver.Config, o *options) { o.metricsAddr = "127.0.0.1:9100" }},
	{name: "pprof", args: []string{"-metrics", "127.0.0.1:9100", "-pprof"}, set: func(c *netserver.Config, o *options) {
		o.metricsAddr, o.pprof = "127.0.0.1:9100", true
	}},
	{name: "log-level", args: []string{"-log-level", "debug"}, set: func(c *netserver.Config, o *options) { o.logLevel = slog.LevelDebug }},
	{name: "log-level warn", args: []string{"--log-level=warn"}, set: func(c *netserver.Config, o *options) { o.logLevel = slog.LevelWarn }},
	{name: "log-format", args: []string{"-log-format", "json"}, set: func(c *netserver.Config, o *options) { o.logFormat = "json" }},
}

func TestParseFlags_Defaults(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want netserver.Protocol
	}{
		{name: "no flags", args: nil, want: netserver.Raw},
		{name: "framed", args: []string{"-proto", "framed"}, want: netserver.Framed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, o, err := parse(tc.args, &bytes.Buffer{})
			require.NoError(t, err, "the framed-only defaults do not count as flags given")
			wantCfg, wantO := defaults(tc.want)
			assert.Equal(t, wantCfg, cfg)
			assert.Equal(t, wantO, o)
		})
	}
}

// TestParseFlags_SafeDefaults: with no flags, nothing can hold a
// connection forever, and the defaults make a valid server.
func TestParseFlags_SafeDefaults(t *testing.T) {
	for _, proto := range []string{"raw", "framed"} {
		t.Run(proto, func(t *testing.T) {
			cfg, o, err := parse([]string{"-proto", proto}, &bytes.Buffer{})
			require.NoError(t, err)
			tm := cfg.Timeouts
			assert.Equal(t, 10*time.Second, tm.HandshakeTimeout, "a silent new connection")
			assert.Equal(t, 5*time.Minute, tm.IdleTimeout, "a silent peer")
			assert.Equal(t, 30*time.Second, tm.WriteStallTimeout, "a peer that does not read")
			assert.Equal(t, netserver.Limits{}, cfg.Limits, "netserver's output limits, on by default")
			assert.Equal(t, testOpenFiles-64-3*eventLoops(0), cfg.MaxConns)
			assert.False(t, o.pprof)
			if proto == "framed" {
				assert.Equal(t, 30*time.Second, tm.FrameTimeout, "a slowloris")
				assert.Equal(t, 30*time.Second, tm.KeepaliveTime, "a half-open peer")
				assert.Equal(t, 10*time.Second, tm.KeepaliveTimeout)
			} else {
				assert.Zero(t, tm.FrameTimeout, "raw has no frames")
				assert.Zero(t, tm.KeepaliveTime, "raw has no probe")
				assert.Zero(t, tm.KeepaliveTimeout)
			}
			_, err = netserver.New(cfg, netserver.Echo{})
			assert.NoError(t, err)
		})
	}
}

// TestParseFlags_OpenFileLimit: parseFlags derives -max-conns from this
// process's limit.
func TestParseFlags_OpenFileLimit(t *testing.T) {
	cfg, o, err := parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, fdlimit.OpenFiles(), o.openFiles)
	assert.Equal(t, fdlimit.MaxConns(fdlimit.OpenFiles(), eventLoops(0)), cfg.MaxConns)
}

// TestParseFlags_TurnOff: an explicit 0 (-1 for a limit) turns each
// default off, and the result is still valid.
func TestParseFlags_TurnOff(t *testing.T) {
	tests := []struct {
		name string
		args []string
		off  func(c *netserver.Config)
	}{
		{name: "handshake", args: []string{"-handshake-timeout", "0"}, off: func(c *netserver.Config) { c.Timeouts.HandshakeTimeout = 0 }},
		{name: "idle", args: []string{"-idle-timeout", "0"}, off: func(c *netserver.Config) { c.Timeouts.IdleTimeout = 0 }},
		{name: "write stall", args: []string{"-write-stall-timeout=0"}, off: func(c *netserver.Config) { c.Timeouts.WriteStallTimeout = 0 }},
		{name: "max conns", args: []string{"-max-conns", "0"}, off: func(c *netserver.Config) { c.MaxConns = -1 }},
		{name: "max age", args: []string{"-max-age", "0"}, off: func(c *netserver.Config) { c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter = 0, 0 }},
		{name: "output hard", args: []string{"-output-hard", "-1"}, off: func(c *netserver.Config) { c.Limits.OutputHard = -1 }},
		{name: "output soft", args: []string{"-output-soft", "-1"}, off: func(c *netserver.Config) { c.Limits.OutputSoft = -1 }},
		{name: "frame", args: []string{"-proto", "framed", "-frame-timeout", "0"}, off: func(c *netserver.Config) { c.Timeouts.FrameTimeout = 0 }},
		{name: "keepalive", args: []string{"-proto", "framed", "-keepalive-time", "0"}, off: func(c *netserver.Config) {
			c.Timeouts.KeepaliveTime, c.Timeouts.KeepaliveTimeout = 0, 0
		}},
		{name: "unacked", args: []string{"-proto", "framed", "-unacked-bytes", "-1"}, off: func(c *netserver.Config) { c.Limits.UnackedBytes = -1 }},
		{name: "everything", args: []string{"-proto", "framed", "-handshake-timeout", "0", "-idle-timeout", "0", "-write-stall-timeout", "0",
			"-frame-timeout", "0", "-keepalive-time", "0", "-max-age", "0", "-max-conns", "0", "-output-hard", "-1", "-output-soft", "-1", "-unacked-bytes", "-1"},
			off: func(c *netserver.Config) {
				c.Timeouts, c.MaxConns = idle.Config{}, -1
				c.Limits = netserver.Limits{OutputHard: -1, OutputSoft: -1, UnackedBytes: -1}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parse(tc.args, &bytes.Buffer{})
			require.NoError(t, err)
			want, _ := defaults(cfg.Protocol)
			tc.off(&want)
			assert.Equal(t, want, cfg)
			_, err = netserver.New(cfg, netserver.Echo{})
			assert.NoError(t, err)
		})
	}
}

// TestParseFlags_DefaultsFit: a default that could never fire next to the
// flags given is left off rather than making them invalid; explicit
// settings are kept.
func TestParseFlags_DefaultsFit(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(c *netserver.Config) // from the protocol's defaults
	}{
		{name: "max age below idle", args: []string{"-max-age", "1m"}, want: func(c *netserver.Config) {
			c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter, c.Timeouts.IdleTimeout = time.Minute, 0, 0
		}},
		{name: "idle at the default max age's lifetime", args: []string{"-idle-timeout", "66m"}, want: func(c *netserver.Config) {
			c.Timeouts.IdleTimeout, c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter = 66*time.Minute, 0, 0
		}},
		{name: "idle just below the default max age's lifetime", args: []string{"-idle-timeout", "65m"}, want: func(c *netserver.Config) {
			c.Timeouts.IdleTimeout = 65 * time.Minute
		}},
		{name: "max age grace alone keeps the default max age off", args: []string{"-max-age-grace", "0"}, want: func(c *netserver.Config) {
			c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter = 0, 0
		}},
		{name: "lifetime just above idle", args: []string{"-max-age", "4m", "-max-age-jitter", "30s", "-max-age-grace", "31s"},
			want: func(c *netserver.Config) {
				c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter, c.Timeouts.MaxAgeGrace = 4*time.Minute, 30*time.Second, 31*time.Second
			}},
		{name: "lifetime equal to idle", args: []string{"-max-age", "4m", "-max-age-jitter", "30s", "-max-age-grace", "30s"},
			want: func(c *netserver.Config) {
				c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter, c.Timeouts.MaxAgeGrace = 4*time.Minute, 30*time.Second, 30*time.Second
				c.Timeouts.IdleTimeout = 0
			}},
		{name: "max age below all", args: []string{"-max-age", "5s"}, want: func(c *netserver.Config) {
			c.Timeouts = idle.Config{MaxAge: 5 * time.Second}
		}},
		{name: "explicit timeouts are kept", args: []string{"-max-age", "5s", "-handshake-timeout", "1s"}, want: func(c *netserver.Config) {
			c.Timeouts = idle.Config{MaxAge: 5 * time.Second, HandshakeTimeout: time.Second}
		}},
		{name: "framed max age", args: []string{"-proto", "framed", "-max-age", "20s"}, want: func(c *netserver.Config) {
			c.Timeouts = idle.Config{MaxAge: 20 * time.Second, HandshakeTimeout: 10 * time.Second}
		}},
		{name: "read silence at keepalive time", args: []string{"-proto", "framed", "-read-silence-timeout", "30s"}, want: func(c *netserver.Config) {
			c.Timeouts.ReadSilenceTimeout, c.Timeouts.KeepaliveTime, c.Timeouts.KeepaliveTimeout = 30*time.Second, 0, 0
		}},
		{name: "read silence above keepalive time", args: []string{"-proto", "framed", "-read-silence-timeout", "31s"}, want: func(c *netserver.Config) {
			c.Timeouts.ReadSilenceTimeout = 31 * time.Second
		}},
		{name: "raw read silence", args: []string{"-read-silence-timeout", "1s"}, want: func(c *netserver.Config) {
			c.Timeouts.ReadSilenceTimeout = time.Second
		}},
		{name: "keepalive time given", args: []string{"-proto", "framed", "-keepalive-time", "1m"}, want: func(c *netserver.Config) {
			c.Timeouts.KeepaliveTime = time.Minute
		}},
		{name: "keepalive timeout given", args: []string{"-proto", "framed", "-keepalive-timeout", "3s"}, want: func(c *netserver.Config) {
			c.Timeouts.KeepaliveTimeout = 3 * time.Second
		}},
		{name: "huge max age does not overflow", args: []string{"-max-age", "2562047h", "-max-age-jitter", "2562046h", "-max-age-grace", "2562047h"},
			want: func(c *netserver.Config) {
				c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter, c.Timeouts.MaxAgeGrace = 2562047*time.Hour, 2562046*time.Hour, 2562047*time.Hour
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parse(tc.args, &bytes.Buffer{})
			require.NoError(t, err)
			want, _ := defaults(cfg.Protocol)
			tc.want(&want)
			assert.Equal(t, want, cfg)
			_, err = netserver.New(cfg, netserver.Echo{})
			assert.NoError(t, err)
		})
	}
}

func TestEventLoops(t *testing.T) {
	assert.Equal(t, 5, eventLoops(5))
	assert.Equal(t, max(1, runtime.GOMAXPROCS(0)-1), eventLoops(0))
}

func TestParseFlags_Lands(t *testing.T) {
	for _, tc := range landCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, o, err := parse(tc.args, &bytes.Buffer{})
			require.NoError(t, err)
			wantCfg, wantO := wantFor(tc.set)
			assert.Equal(t, wantCfg, cfg)
			assert.Equal(t, wantO, o)
		})
	}
}

// TestParseFlags_EveryField fails when a Config field has no flag: a new
// setting in netserver, idle or retransmit needs one here.
func TestParseFlags_EveryField(t *testing.T) {
	// Set by run or by tests, not by flags.
	// HandlerMarks is for handlers that mark their protocol's events (Echo
	// does not); the metrics' namespace and labels are for servers that
	// share a registry (the binary has its own).
	noFlag := map[string]bool{"Logger": true, "Registerer": true, "Timeouts.Jitter": true, "HandlerMarks": true,
		"MetricsNamespace": true, "MetricsLabels": true}
	covered := map[string]bool{}
	for _, tc := range landCases {
		cfg, _, err := parse(tc.args, &bytes.Buffer{})
		require.NoError(t, err, tc.name)
		// Against the defaults of the protocol set, so that the framed
		// defaults do not pass for flags.
		def, _ := defaults(cfg.Protocol)
		for _, f := range changedFields(reflect.ValueOf(cfg), reflect.ValueOf(def), "") {
			covered[f] = true
		}
		covered["Protocol"] = covered["Protocol"] || cfg.Protocol != netserver.Raw
	}
	var missing []string
	for _, f := range leafFields(reflect.TypeOf(netserver.Config{}), "") {
		if !noFlag[f] && !covered[f] {
			missing = append(missing, f)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "Config fields that no flag sets")
}

func leafFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
			out = append(out, leafFields(f.Type, prefix+f.Name+".")...)
			continue
		}
		out = append(out, prefix+f.Name)
	}
	return out
}

func changedFields(a, b reflect.Value, prefix string) []string {
	var out []string
	for i := range a.NumField() {
		name := prefix + a.Type().Field(i).Name
		fa, fb := a.Field(i), b.Field(i)
		switch {
		case fa.Kind() == reflect.Struct:
			out = append(out, changedFields(fa, fb, name+".")...)
		case fa.Kind() == reflect.Func || fa.Kind() == reflect.Interface || fa.Kind() == reflect.Pointer || fa.Kind() == reflect.Map:
			// not set by flags
		case !fa.Equal(fb):
			out = append(out, name)
		}
	}
	return out
}

func TestParseFlags_Errors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{name: "unknown flag", args: []string{"-idle", "1s"}, want: []string{"flag provided but not defined: -idle", "echo -h"}},
		{name: "missing value", args: []string{"-idle-timeout"}, want: []string{"flag needs an argument: -idle-timeout"}},
		{name: "proto", args: []string{"-proto", "tcp"}, want: []string{`"tcp"`, "-proto", "want raw or framed"}},
		{name: "proto case", args: []string{"-proto", "RAW"}, want: []string{"-proto", "want raw or framed"}},
		{name: "duration without unit", args: []string{"-idle-timeout", "30"}, want: []string{`"30"`, "-idle-timeout", "500ms, 30s or 1m30s"}},
		{name: "duration garbage", args: []string{"-tick", "fast"}, want: []string{"-tick", "want a duration"}},
		{name: "negative duration", args: []string{"-max-age", "-1s"}, want: []string{"-max-age", "want a duration of 0 or more"}},
		{name: "negative shutdown timeout", args: []string{"-shutdown-timeout", "-5s"}, want: []string{"-shutdown-timeout", "0 or more"}},
		{name: "negative count", args: []string{"-max-conns", "-1"}, want: []string{"-max-conns", "want a whole number, 0 or more"}},
		{name: "not a number", args: []string{"-event-loops", "many"}, want: []string{"-event-loops", "want a whole number"}},
		{name: "bool", args: []string{"-reuse-port=maybe"}, want: []string{"-reuse-port", "want true or false"}},
		{name: "variant", args: []string{"-proto", "framed", "-rto-variant", "bsd"}, want: []string{"-rto-variant", "want rfc6298 or linux"}},
		{name: "log level", args: []string{"-log-level", "verbose"}, want: []string{"-log-level", "want debug, info, warn or error"}},
		{name: "log format", args: []string{"-log-format", "xml"}, want: []string{"-log-format", "want text or json"}},
		{name: "positional", args: []string{"-addr", ":1", "extra"}, want: []string{`unexpected argument "extra"`}},
		{name: "retransmit with raw", args: []string{"-max-rto", "5s"}, want: []string{"-max-rto needs -proto framed (raw has no retransmission)"}},
		{name: "keepalive with raw", args: []string{"-keepalive-time", "5s", "-keepalive-timeout", "1s"},
			want: []string{"-keepalive-time needs -proto framed", "-keepalive-timeout needs -proto framed", "-tcp-keepalive-idle"}},
		{name: "frame timeout with raw", args: []string{"-frame-timeout", "1s"}, want: []string{"-frame-timeout needs -proto framed (raw has no frames)"}},
		{name: "max frame with raw", args: []string{"-proto", "raw", "-max-frame", "100"}, want: []string{"-max-frame needs -proto framed"}},
		{name: "silent shutdown with raw", args: []string{"-silent-shutdown"}, want: []string{"-silent-shutdown needs -proto framed"}},
		{name: "unacked bytes with raw", args: []string{"-unacked-bytes", "100"},
			want: []string{"-unacked-bytes needs -proto framed (raw has no acknowledgements)"}},
		{name: "framed-only 0 with raw", args: []string{"-frame-timeout", "0"}, want: []string{"-frame-timeout needs -proto framed"}},
		{name: "pprof without metrics", args: []string{"-pprof"}, want: []string{"-pprof needs -metrics"}},
		{name: "size with unit", args: []string{"-output-hard", "4MiB"}, want: []string{"-output-hard", "want a whole number: 0 for the default, -1 for off"}},
		{name: "soft-for without unit", args: []string{"-output-soft-for", "10"}, want: []string{"-output-soft-for", "want a duration", "0 or -1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var help bytes.Buffer
			_, _, err := parse(tc.args, &help)
			require.Error(t, err)
			assert.False(t, errors.Is(err, flag.ErrHelp))
			assert.True(t, strings.HasPrefix(err.Error(), "echo: "), err.Error())
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Empty(t, help.String(), "errors do not print the whole help")
		})
	}
}

func TestParseFlags_Help(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		t.Run(arg, func(t *testing.T) {
			var help bytes.Buffer
			_, _, err := parse([]string{arg}, &help)
			require.ErrorIs(t, err, flag.ErrHelp)
			out := help.String()
			assert.Contains(t, out, "Usage: echo [flags]")
			assert.Contains(t, out, "Go durations")
			// Every flag is explained, on a line of its own.
			var cfg netserver.Config
			var o options
			newFlagSet(&cfg, &o, testOpenFiles).fs.VisitAll(func(f *flag.Flag) {
				assert.Regexp(t, regexp.MustCompile(`(?m)^  -`+regexp.QuoteMeta(f.Name)+`( |$)`), out)
			})
			// Defaults and units are spelt out.
			for _, w := range []string{`(default ":9000")`, "(0 = GOMAXPROCS-1, at least 1)", "(0 = 1ms)", "(0 = 1s)", "(0 = 200ms)",
				"(0 = 1m)", "default 10s", "(0 = no limit)", "(0 = 64 KiB)", "Connection timeouts (0 = off)",
				"Per-connection memory limits (on by default; 0 = default, -1 = off)",
				"(0 = 4194304, 4 MiB)", "(0 = 1048576, 1 MiB)", "(0 = 10s; -1 turns the soft limit off",
				"-pprof", "also serve /debug/pprof/ on -metrics (default off",
				"less 64 and 3 per\n", fmt.Sprintf("%d = %d - 64 - 3×%d", testOpenFiles-64-3*eventLoops(0), testOpenFiles, eventLoops(0))} {
				assert.Contains(t, out, w)
			}
			// Each safe default, with why it is on (\n: the line goes on).
			for _, w := range []string{
				"Default 5m (0 = off): longer than a live",
				"Default 30s (0 = off): with\n",
				"finds a half-open peer in about 40s",
				"Default 10s when -keepalive-time is on",
				"Default 30s (0 = off):\n",
				"slowloris defence",
				"Default 10s (0 = off): an echo client",
				"Default 30s (0 = off): the peer is not reading",
			} {
				assert.Contains(t, out, w)
			}
		})
	}
}

func TestFlagNames(t *testing.T) {
	// Real validation errors from netserver (and through it idle and
	// retransmit), for configs the flags can produce.
	tests := []struct {
		name string
		cfg  netserver.Config
		want string
	}{
		{name: "keepalive needs framed", cfg: netserver.Config{Addr: ":0", Timeouts: idle.Config{KeepaliveTime: time.Second, KeepaliveTimeout: time.Second}},
			want: "-keepalive-time with the raw protocol needs a Handler that implements Prober"},
		{name: "keepalive timeout", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed, Timeouts: idle.Config{KeepaliveTime: time.Second}},
			want: "-keepalive-time is set but -keepalive-timeout is 0"},
		{name: "keepalive vs read silence", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed,
			Timeouts: idle.Config{KeepaliveTime: time.Minute, KeepaliveTimeout: time.Second, ReadSilenceTimeout: time.Second}},
			want: "-keepalive-time 1m0s is not below -read-silence-timeout 1s"},
		{name: "max age jitter", cfg: netserver.Config{Addr: ":0", Timeouts: idle.Config{MaxAge: time.Second, MaxAgeJitter: time.Second}},
			want: "-max-age-jitter 1s, -max-age 1s"},
		{name: "grace without max age", cfg: netserver.Config{Addr: ":0", Timeouts: idle.Config{MaxAgeGrace: time.Second}},
			want: "-max-age-grace is set but -max-age is 0"},
		{name: "longer than max age", cfg: netserver.Config{Addr: ":0", Timeouts: idle.Config{MaxAge: time.Second, IdleTimeout: time.Minute}},
			want: "-idle-timeout 1m0s is not below the longest lifetime 1s (-max-age+-max-age-jitter+-max-age-grace)"},
		{name: "rto", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed, Retransmit: retransmit.Config{MinRTO: time.Second, MaxRTO: time.Millisecond}},
			want: "-min-rto 1s exceeds -max-rto 1ms"},
		{name: "window", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed, Retransmit: retransmit.Config{Window: retransmit.MaxWindow + 1}},
			want: "-window 1048577 outside"},
		{name: "tick", cfg: netserver.Config{Addr: ":0", Tick: time.Nanosecond}, want: "-tick 1ns outside"},
		{name: "addr", cfg: netserver.Config{Addr: "nowhere"}, want: `-addr "nowhere"`},
		{name: "max frame", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed, MaxFrame: 1}, want: "-max-frame 1 below"},
		{name: "tcp keepalive", cfg: netserver.Config{Addr: ":0", Kernel: netserver.KernelConfig{KeepaliveCount: 3}},
			want: "-tcp-keepalive-interval/-tcp-keepalive-count need -tcp-keepalive-idle"},
		{name: "output soft above hard", cfg: netserver.Config{Addr: ":0", Limits: netserver.Limits{OutputHard: 100, OutputSoft: 200}},
			want: "-output-soft 200 above -output-hard 100"},
		{name: "output soft above default hard", cfg: netserver.Config{Addr: ":0", Limits: netserver.Limits{OutputSoft: 5 << 20}},
			want: "-output-soft 5242880 above the default -output-hard 4194304: raise -output-hard too"},
		{name: "unacked bytes with raw", cfg: netserver.Config{Addr: ":0", Limits: netserver.Limits{UnackedBytes: 1}},
			want: "-unacked-bytes needs the framed protocol"},
	}
	fields := make([]string, 0, len(fieldFlags))
	for f := range fieldFlags {
		fields = append(fields, regexp.QuoteMeta(f))
	}
	leftover := regexp.MustCompile(`\b(` + strings.Join(fields, "|") + `)\b`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := netserver.New(tc.cfg, netserver.Echo{})
			require.ErrorIs(t, err, netserver.ErrConfig)
			got := flagNames(err.Error())
			assert.Contains(t, got, tc.want)
			assert.NotRegexp(t, leftover, got, "a Config field name was left in")
		})
	}
}
