package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
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
// that -max-conns' default does not depend on the machine's.
const testOpenFiles = 10000

// parse is parseFlags under testOpenFiles.
func parse(args []string, help *bytes.Buffer) (netserver.Config, options, error) {
	return parseFlagsLimit(args, help, testOpenFiles)
}

// wantFor returns what parse should give: the zero Config but for the
// address, and the binary's default options, changed by set.
func wantFor(set func(c *netserver.Config, o *options)) (netserver.Config, options) {
	c := netserver.Config{Addr: ":9000"}
	o := options{shutdownTimeout: 10 * time.Second, logLevel: slog.LevelInfo, logFormat: "text", openFiles: testOpenFiles}
	set(&c, &o)
	return c, o
}

// landCases set each flag to a value unlike its default; set applies the
// same change to the zero Config (netserver's defaults) and the binary's
// options. Every other field must stay zero, so a flag bound to the wrong
// field fails.
var landCases = []struct {
	name string
	args []string
	set  func(c *netserver.Config, o *options)
}{
	{name: "addr", args: []string{"-addr", "127.0.0.1:7000"}, set: func(c *netserver.Config, o *options) { c.Addr = "127.0.0.1:7000" }},
	{name: "proto", args: []string{"-proto", "framed"}, set: func(c *netserver.Config, o *options) { c.Protocol = netserver.Framed }},
	{name: "proto raw", args: []string{"-proto=raw"}, set: func(c *netserver.Config, o *options) { c.Protocol = netserver.Raw }},
	{name: "event-loops", args: []string{"-event-loops", "3"}, set: func(c *netserver.Config, o *options) {
		c.EventLoops = 3
	}},
	{name: "reuse-port", args: []string{"-reuse-port"}, set: func(c *netserver.Config, o *options) { c.ReusePort = true }},
	{name: "reuse-port=false", args: []string{"-reuse-port=false"}, set: func(c *netserver.Config, o *options) {}},
	{name: "tick", args: []string{"-tick", "5ms"}, set: func(c *netserver.Config, o *options) { c.Tick = 5 * time.Millisecond }},
	{name: "max-conns", args: []string{"-max-conns", "100"}, set: func(c *netserver.Config, o *options) { c.MaxConns = 100 }},
	{name: "max-conns 0 is the default", args: []string{"-max-conns", "0"}, set: func(c *netserver.Config, o *options) {}},
	{name: "max-conns off", args: []string{"-max-conns", "-1"}, set: func(c *netserver.Config, o *options) { c.MaxConns = netserver.Off }},
	{name: "proxy-protocol", args: []string{"-proxy-protocol", "required", "-trusted-proxies", "10.0.0.0/8, 192.0.2.7,2001:db8::/32"},
		set: func(c *netserver.Config, o *options) {
			c.ProxyProtocol = netserver.ProxyRequired
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
				netip.MustParsePrefix("2001:db8::/32")}
		}},
	{name: "max-conns-per-source", args: []string{"-max-conns-per-source", "50"}, set: func(c *netserver.Config, o *options) { c.MaxConnsPerSource = 50 }},
	{name: "max-conns-per-source off", args: []string{"-max-conns-per-source", "off"}, set: func(c *netserver.Config, o *options) { c.MaxConnsPerSource = netserver.Off }},
	{name: "source bits", args: []string{"-source-ipv4-bits", "24", "-source-ipv6-bits", "48"}, set: func(c *netserver.Config, o *options) {
		c.SourceIPv4Bits, c.SourceIPv6Bits = 24, 48
	}},
	{name: "idle-timeout off", args: []string{"-idle-timeout", "-1"}, set: func(c *netserver.Config, o *options) { c.Timeouts.IdleTimeout = idle.Off }},
	{name: "max-conns -1", args: []string{"-max-conns", "-1"}, set: func(c *netserver.Config, o *options) { c.MaxConns = netserver.Off }},
	{name: "max-conns off", args: []string{"-max-conns", "off"}, set: func(c *netserver.Config, o *options) { c.MaxConns = netserver.Off }},
	{name: "max-conns typo, for netserver to refuse", args: []string{"-max-conns", "-5"}, set: func(c *netserver.Config, o *options) { c.MaxConns = -5 }},
	{name: "idle-timeout -1", args: []string{"-idle-timeout", "-1"}, set: func(c *netserver.Config, o *options) { c.Timeouts.IdleTimeout = idle.Off }},
	{name: "idle-timeout off", args: []string{"-idle-timeout", "off"}, set: func(c *netserver.Config, o *options) { c.Timeouts.IdleTimeout = idle.Off }},
	{name: "idle-timeout typo, for netserver to refuse", args: []string{"-idle-timeout", "-5s"}, set: func(c *netserver.Config, o *options) {
		c.Timeouts.IdleTimeout = -5 * time.Second
	}},
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
	{name: "output limits off", args: []string{"-output-hard", "-1", "-output-soft", "off", "-output-soft-for=off"},
		set: func(c *netserver.Config, o *options) {
			c.Limits = netserver.Limits{OutputHard: netserver.Off, OutputSoft: netserver.Off, OutputSoftFor: netserver.Off}
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
	{name: "shutdown-timeout 0 is the default", args: []string{"-shutdown-timeout", "0"}, set: func(c *netserver.Config, o *options) {}},
	{name: "shutdown-timeout off", args: []string{"-shutdown-timeout", "off"}, set: func(c *netserver.Config, o *options) { o.shutdownTimeout = -1 }},
	{name: "shutdown-timeout -1", args: []string{"-shutdown-timeout", "-1"}, set: func(c *netserver.Config, o *options) { o.shutdownTimeout = -1 }},
	{name: "metrics", args: []string{"-metrics", "127.0.0.1:9100"}, set: func(c *netserver.Config, o *options) { o.metricsAddr = "127.0.0.1:9100" }},
	{name: "pprof", args: []string{"-metrics", "127.0.0.1:9100", "-pprof"}, set: func(c *netserver.Config, o *options) {
		o.metricsAddr, o.pprof = "127.0.0.1:9100", true
	}},
	{name: "log-level", args: []string{"-log-level", "debug"}, set: func(c *netserver.Config, o *options) { o.logLevel = slog.LevelDebug }},
	{name: "log-level warn", args: []string{"--log-level=warn"}, set: func(c *netserver.Config, o *options) { o.logLevel = slog.LevelWarn }},
	{name: "log-format", args: []string{"-log-format", "json"}, set: func(c *netserver.Config, o *options) { o.logFormat = "json" }},
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

// With no flags, every setting is left to netserver: the Config is zero
// but for the address, and New resolves it to DefaultConfig.
func TestParseFlags_Defaults(t *testing.T) {
	cfg, o, err := parse(nil, &bytes.Buffer{})
	require.NoError(t, err)
	wantCfg, wantO := wantFor(func(*netserver.Config, *options) {})
	assert.Equal(t, wantCfg, cfg)
	assert.Equal(t, wantO, o)
	for _, p := range []string{"raw", "framed"} {
		cfg, _, err := parse([]string{"-proto", p}, &bytes.Buffer{})
		require.NoError(t, err)
		got, err := cfg.WithDefaults()
		require.NoError(t, err)
		want := netserver.DefaultConfig(cfg.Protocol)
		want.Addr = ":9000"
		assert.Equal(t, want, got, p)
	}
}

// The help shows netserver's defaults, for every flag that has one.
func TestParseFlags_Help(t *testing.T) {
	var help bytes.Buffer
	_, _, err := parse([]string{"-h"}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	d := netserver.DefaultConfig(netserver.Framed)
	out := help.String()
	assert.True(t, strings.HasPrefix(out, "Usage: echo [flags]\n"), out)
	for flagName, def := range map[string]string{
		"idle-timeout":        d.Timeouts.IdleTimeout.String(),
		"handshake-timeout":   d.Timeouts.HandshakeTimeout.String(),
		"write-stall-timeout": d.Timeouts.WriteStallTimeout.String(),
		"max-age":             d.Timeouts.MaxAge.String(),
		"max-age-jitter":      d.Timeouts.MaxAgeJitter.String(),
		"frame-timeout":       d.Timeouts.FrameTimeout.String(),
		"keepalive-time":      d.Timeouts.KeepaliveTime.String(),
		"keepalive-timeout":   d.Timeouts.KeepaliveTimeout.String(),
		"output-hard":         "4194304",
		"unacked-bytes":       "1048576",
		"window":              "1024",
		"max-conns":           fmt.Sprint(fdlimit.MaxConns(testOpenFiles, max(runtime.GOMAXPROCS(0)-1, 1))),
	} {
		i := strings.Index(out, "  -"+flagName+" ")
		require.GreaterOrEqual(t, i, 0, flagName)
		entry := out[i+3:]
		if j := strings.Index(entry, "\n  -"); j >= 0 {
			entry = entry[:j]
		}
		assert.Contains(t, entry, "(default "+def+")", flagName)
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
		for _, f := range changedFields(reflect.ValueOf(cfg), reflect.ValueOf(netserver.Config{Addr: ":9000"}), "") {
			covered[f] = true
		}
		covered["Addr"] = covered["Addr"] || cfg.Addr != ":9000"
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
		case fa.Kind() == reflect.Slice:
			if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				out = append(out, name)
			}
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
		{name: "duration without unit", args: []string{"-idle-timeout", "30"}, want: []string{`"30"`, "-idle-timeout", "want a duration such as 500ms"}},
		{name: "duration garbage", args: []string{"-tick", "fast"}, want: []string{"-tick", "want a duration"}},
		{name: "duration out of range", args: []string{"-idle-timeout", "9999999h"}, want: []string{`"9999999h"`, "-idle-timeout", "out of range"}},
		{name: "count out of range", args: []string{"-max-retransmits", "99999999999999999999"}, want: []string{"-max-retransmits", "out of range"}},
		{name: "not a number", args: []string{"-event-loops", "many"}, want: []string{"-event-loops", "want a whole number, 0 or off"}},
		{name: "bool", args: []string{"-reuse-port=maybe"}, want: []string{"-reuse-port", "parse error"}},
		{name: "variant", args: []string{"-proto", "framed", "-rto-variant", "bsd"}, want: []string{"-rto-variant", "want rfc6298 or linux"}},
		{name: "log level", args: []string{"-log-level", "verbose"}, want: []string{"-log-level", "verbose"}},
		{name: "log format", args: []string{"-log-format", "xml"}, want: []string{"-log-format", "want text or json"}},
		{name: "bad trusted proxy", args: []string{"-proxy-protocol", "required", "-trusted-proxies", "10.0.0/8"},
			want: []string{"-trusted-proxies", `"10.0.0/8" is not a prefix such as 10.0.0.0/8`}},
		{name: "proxy protocol on", args: []string{"-proxy-protocol", "on"}, want: []string{"-proxy-protocol", "want off or required"}},
		{name: "positional", args: []string{"-addr", ":1", "extra"}, want: []string{`unexpected argument "extra"`}},
		{name: "retransmit with raw", args: []string{"-max-rto", "5s"}, want: []string{"-max-rto needs -proto framed"}},
		{name: "keepalive with raw", args: []string{"-keepalive-time", "5s", "-keepalive-timeout", "1s"},
			want: []string{"-keepalive-time needs -proto framed", "-keepalive-timeout needs -proto framed"}},
		{name: "frame timeout with raw", args: []string{"-frame-timeout", "1s"}, want: []string{"-frame-timeout needs -proto framed"}},
		{name: "max frame with raw", args: []string{"-proto", "raw", "-max-frame", "100"}, want: []string{"-max-frame needs -proto framed"}},
		{name: "silent shutdown with raw", args: []string{"-silent-shutdown"}, want: []string{"-silent-shutdown needs -proto framed"}},
		{name: "unacked bytes with raw", args: []string{"-unacked-bytes", "100"}, want: []string{"-unacked-bytes needs -proto framed"}},
		{name: "pprof without metrics", args: []string{"-pprof"}, want: []string{"-pprof needs -metrics"}},
		{name: "size with unit", args: []string{"-output-hard", "4MiB"}, want: []string{"-output-hard", "want a whole number"}},
		{name: "metrics address", args: []string{"-metrics", "bad"}, want: []string{`-metrics "bad": address bad: missing port in address`}},
		{name: "metrics port", args: []string{"-metrics", "127.0.0.1:99999"}, want: []string{`-metrics "127.0.0.1:99999"`, "invalid port"}},
		{name: "shutdown-timeout typo", args: []string{"-shutdown-timeout", "-1s"},
			want: []string{"-shutdown-timeout -1s is negative: 0 means the default, -1 (Off) turns it off"}},
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
			assert.Empty(t, help.String(), "errors do not print the help")
		})
	}
}

// A flag given next to defaults that could never fire beside it leaves
// them off, as netserver does for zero values: netserver accepts the
// result.
func TestParseFlags_DefaultsFit(t *testing.T) {
	for _, args := range [][]string{
		{"-max-age", "1m"},
		{"-proto", "framed", "-max-age", "20s"},
		{"-proto", "framed", "-read-silence-timeout", "20s"},
		{"-idle-timeout", "2h"},
	} {
		cfg, _, err := parse(args, &bytes.Buffer{})
		require.NoError(t, err, "%v", args)
		cfg.Addr = "127.0.0.1:0"
		_, err = netserver.New(cfg, netserver.Echo{})
		assert.NoError(t, err, "%v", args)
	}
}

// The flag values of the one rule: 0, off and -1 for Off, and any other
// negative value taken as given, for netserver to refuse with its words.
func TestFlagValues_Set(t *testing.T) {
	dur := func() flag.Value { return new(duration) }
	num := func() flag.Value { return new(count) }
	for _, tc := range []struct {
		value   func() flag.Value
		in      string
		want    string // the value's String after Set
		wantErr string
	}{
		{value: dur, in: "0", want: "0s"},
		{value: dur, in: "-1", want: "-1ns"},
		{value: dur, in: "off", want: "-1ns"},
		{value: dur, in: "-1ns", want: "-1ns"},
		{value: dur, in: "1m30s", want: "1m30s"},
		{value: dur, in: "-2s", want: "-2s"},
		{value: dur, in: "Off", wantErr: "want a duration"},
		{value: dur, in: "2562047h", want: "2562047h0m0s"},
		{value: dur, in: "2562048h", wantErr: "out of range"},
		{value: dur, in: "1.5e9h", wantErr: "want a duration"},
		{value: dur, in: "30", wantErr: "want a duration"},
		{value: dur, in: "", wantErr: "want a duration"},
		{value: num, in: "0", want: "0"},
		{value: num, in: "-1", want: "-1"},
		{value: num, in: "off", want: "-1"},
		{value: num, in: "4096", want: "4096"},
		{value: num, in: "-5", want: "-5"},
		{value: num, in: "99999999999999999999", wantErr: "out of range"},
		{value: num, in: "1e3", wantErr: "want a whole number"},
		{value: num, in: "", wantErr: "want a whole number"},
	} {
		v := tc.value()
		name := fmt.Sprintf("%T %q", v, tc.in)
		err := v.Set(tc.in)
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, name)
			continue
		}
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, v.String(), name)
	}
}
