package main

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/retransmit"
)

func defaults() (netserver.Config, options) {
	return netserver.Config{Addr: ":9000"},
		options{shutdownTimeout: 10 * time.Second, logLevel: slog.LevelInfo, logFormat: "text"}
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
	{name: "event-loops", args: []string{"-event-loops", "3"}, set: func(c *netserver.Config, o *options) { c.EventLoops = 3 }},
	{name: "reuse-port", args: []string{"-reuse-port"}, set: func(c *netserver.Config, o *options) { c.ReusePort = true }},
	{name: "reuse-port=false", args: []string{"-reuse-port=false"}, set: func(c *netserver.Config, o *options) {}},
	{name: "tick", args: []string{"-tick", "5ms"}, set: func(c *netserver.Config, o *options) { c.Tick = 5 * time.Millisecond }},
	{name: "max-conns", args: []string{"-max-conns", "100"}, set: func(c *netserver.Config, o *options) { c.MaxConns = 100 }},
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
	{name: "max-age", args: []string{"-max-age", "1h", "-max-age-jitter", "5m", "-max-age-grace", "30s"}, set: func(c *netserver.Config, o *options) {
		c.Timeouts.MaxAge, c.Timeouts.MaxAgeJitter, c.Timeouts.MaxAgeGrace = time.Hour, 5*time.Minute, 30*time.Second
	}},
	{name: "write-stall-timeout", args: []string{"-write-stall-timeout", "6s"}, set: func(c *netserver.Config, o *options) {
		c.Timeouts.WriteStallTimeout = 6 * time.Second
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
	{name: "log-level", args: []string{"-log-level", "debug"}, set: func(c *netserver.Config, o *options) { o.logLevel = slog.LevelDebug }},
	{name: "log-level warn", args: []string{"--log-level=warn"}, set: func(c *netserver.Config, o *options) { o.logLevel = slog.LevelWarn }},
	{name: "log-format", args: []string{"-log-format", "json"}, set: func(c *netserver.Config, o *options) { o.logFormat = "json" }},
}

func TestParseFlags_Defaults(t *testing.T) {
	cfg, o, err := parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	wantCfg, wantO := defaults()
	assert.Equal(t, wantCfg, cfg)
	assert.Equal(t, wantO, o)
}

func TestParseFlags_Lands(t *testing.T) {
	for _, tc := range landCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, o, err := parseFlags(tc.args, &bytes.Buffer{})
			require.NoError(t, err)
			wantCfg, wantO := defaults()
			tc.set(&wantCfg, &wantO)
			assert.Equal(t, wantCfg, cfg)
			assert.Equal(t, wantO, o)
		})
	}
}

// TestParseFlags_EveryField fails when a Config field has no flag: a new
// setting in netserver, idle or retransmit needs one here.
func TestParseFlags_EveryField(t *testing.T) {
	// Set by run or by tests, not by flags.
	noFlag := map[string]bool{"Logger": true, "Registerer": true, "Timeouts.Jitter": true}
	covered := map[string]bool{}
	for _, tc := range landCases {
		cfg, _, err := parseFlags(tc.args, &bytes.Buffer{})
		require.NoError(t, err, tc.name)
		def, _ := defaults()
		for _, f := range changedFields(reflect.ValueOf(cfg), reflect.ValueOf(def), "") {
			covered[f] = true
		}
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
		case fa.Kind() == reflect.Func || fa.Kind() == reflect.Interface || fa.Kind() == reflect.Pointer:
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var help bytes.Buffer
			_, _, err := parseFlags(tc.args, &help)
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
			_, _, err := parseFlags([]string{arg}, &help)
			require.ErrorIs(t, err, flag.ErrHelp)
			out := help.String()
			assert.Contains(t, out, "Usage: echo [flags]")
			assert.Contains(t, out, "Go durations")
			// Every flag is explained, on a line of its own.
			var cfg netserver.Config
			var o options
			newFlagSet(&cfg, &o).fs.VisitAll(func(f *flag.Flag) {
				assert.Regexp(t, regexp.MustCompile(`(?m)^  -`+regexp.QuoteMeta(f.Name)+`( |$)`), out)
			})
			// Defaults and units are spelt out.
			for _, w := range []string{`(default ":9000")`, "(0 = GOMAXPROCS-1, at least 1)", "(0 = 1ms)", "(0 = 1s)", "(0 = 200ms)",
				"(0 = 1m)", "default 10s", "(0 = no limit)", "(0 = 64 KiB)", "Connection timeouts (0 = off)"} {
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
			want: "-keepalive-time needs the framed protocol"},
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
