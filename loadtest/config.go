package main

import (
	"fmt"
	"github.com/netwheel/netwheel/netserver"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// presets are -preset's protocols: each message, and what its answer must
// be (ParseExpect's syntax). http's Host is -addr.
var presets = map[string]struct{ payload, expect string }{
	"redis":     {payload: `PING\r\n`, expect: `+PONG\r\n`},
	"memcached": {payload: `version\r\n`, expect: `VERSION `},
	"http":      {payload: `GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: netwheel-loadtest\r\n\r\n`, expect: `HTTP/1.`},
	"line":      {payload: `ping\n`},
}

// parseExchange sets o.payload and o.expect from -payload, -expect and
// -preset (set: the flags given): raw only; a protocol other than echo
// only with -addr, the embedded servers being echo servers.
func parseExchange(o *options, payload, expect, preset string, set map[string]bool) error {
	if !set["payload"] && !set["expect"] && !set["preset"] {
		return nil
	}
	if o.proto != attack.Raw {
		return fmt.Errorf("%w: -payload, -expect and -preset describe a raw protocol; they cannot be used with -proto framed", errUsage)
	}
	if (set["payload"] || set["preset"]) && set["size"] {
		return fmt.Errorf("%w: -size is the length of the default payload; with -payload or -preset, leave it out", errUsage)
	}
	if set["preset"] {
		pr, ok := presets[preset]
		if !ok {
			return fmt.Errorf("%w: -preset %q: want redis, memcached, http or line", errUsage, preset)
		}
		if !set["payload"] {
			payload = pr.payload
			if preset == "http" {
				payload = fmt.Sprintf(payload, o.addr)
			}
		}
		if !set["expect"] {
			expect = pr.expect
		}
	}
	var err error
	if o.expect, err = attack.ParseExpect(expect); err != nil {
		return fmt.Errorf("%w: -expect: %v", errUsage, err)
	}
	if preset == "line" && !set["expect"] {
		o.expect = attack.Expect{Kind: attack.AnswerLine} // any line
	}
	if o.expect.Kind != attack.AnswerEcho && o.addr == "" {
		return fmt.Errorf("%w: -expect and -preset describe an external server's protocol and need -addr (the embedded servers echo)", errUsage)
	}
	if set["payload"] || set["preset"] {
		b, err := attack.Unescape(payload)
		if err != nil {
			return fmt.Errorf("%w: -payload: %v", errUsage, err)
		}
		if len(b) == 0 || len(b) > frame.DefaultMax-9 {
			return fmt.Errorf("%w: -payload: want 1 to %d bytes, got %d", errUsage, frame.DefaultMax-9, len(b))
		}
		o.payload, o.size = b, len(b)
	}
	return nil
}

// timeoutFlags maps each server timeout flag to the field of
// report.Timeouts it sets, for knownTimeouts.
var timeoutFlags = map[string]func(t *report.Timeouts) any{
	"idle":              func(t *report.Timeouts) any { return &t.Idle },
	"keepalive":         func(t *report.Timeouts) any { return &t.KeepaliveTime },
	"keepalive-timeout": func(t *report.Timeouts) any { return &t.KeepaliveTimeout },
	"keepalive-count":   func(t *report.Timeouts) any { return &t.KeepaliveCount },
	"frame-timeout":     func(t *report.Timeouts) any { return &t.Frame },
	"handshake":         func(t *report.Timeouts) any { return &t.Handshake },
	"rto":               func(t *report.Timeouts) any { return &t.InitialRTO },
	"min-rto":           func(t *report.Timeouts) any { return &t.MinRTO },
	"max-rto":           func(t *report.Timeouts) any { return &t.MaxRTO },
	"max-retransmits":   func(t *report.Timeouts) any { return &t.MaxRetransmits },
	"give-up":           func(t *report.Timeouts) any { return &t.GiveUpAfter },
	"tick":              func(t *report.Timeouts) any { return &t.Tick },
}

// knownTimeouts returns what is known of an external server's timeouts:
// t with the server's fields that no flag gave zeroed (the harness's own,
// the slack, kept).
func knownTimeouts(t report.Timeouts, set map[string]bool) *report.Timeouts {
	k := t
	for name, field := range timeoutFlags {
		if set[name] {
			continue
		}
		switch f := field(&k).(type) {
		case *time.Duration:
			*f = 0
		case *int:
			*f = 0
		}
	}
	return &k
}

// assumedTimeouts returns a note for each timeout an external server's
// scenario is judged against that no flag gave: the harness's default is
// assumed.
func assumedTimeouts(o *options, set map[string]bool) []string {
	var notes []string
	for _, s := range o.scenarios {
		if notApplicable(o, s) != "" {
			continue
		}
		var missing []string
		for _, name := range scenario.Lookup(s).Timeouts {
			if !set[name] {
				missing = append(missing, "-"+name)
			}
		}
		if len(missing) > 0 {
			notes = append(notes, fmt.Sprintf("%s: judged against the harness's default %s (not given: the server's own may differ)", s, strings.Join(missing, ", ")))
		}
	}
	return notes
}

// env is what the scenario table needs to know of the run o describes.
func env(o *options) scenario.Env {
	e := scenario.Env{Proto: o.proto, External: o.addr != "", EchoAnswers: o.expect.Kind == attack.AnswerEcho,
		CountedAnswers: o.expect.Counted(), OtherProtocol: o.payload != nil || o.expect.Kind != attack.AnswerEcho,
		Expect: o.expect.String(), Size: o.size, Handshake: o.timeouts.Handshake, Frame: o.timeouts.Frame, MaxConns: o.maxConns,
		HostileBytes: o.hostileBytes, OutputLimit: o.outputLimit, UnackedLimit: o.unackedLimit,
		Proxy: o.edge.proxyVersion != "", MaxConnsPerSource: o.edge.maxConnsPerSource}
	t, known := o.timeouts, o.timeouts
	if o.known != nil {
		known = *o.known
		e.Frame = known.Frame // an external server's request deadline: only if given
	}
	e.Idle, e.KnownIdle, e.KeepaliveTime, e.KeepaliveTimeout = t.Idle, known.Idle, t.KeepaliveTime, t.KeepaliveTimeout
	e.DeadPeerAfter, e.KnownDeadPeerAfter, e.Rate, e.Closed = t.DeadPeerAfter(), known.DeadPeerAfter(), o.rate, o.closed
	_, e.GiveUp, e.LadderErr = attack.Ladder(t)
	return e
}

// notApplicable returns why scenario s cannot be judged in the run o
// describes, or "" (scenario.Spec.NotApplicable).
func notApplicable(o *options, s string) string { return scenario.Lookup(s).NotApplicable(env(o)) }

// parseScenarios parses -scenario: a comma-separated list, or all (the
// default; mixed is its old name): every scenario that applies in e and
// is in the default set (scenario.Spec.InDefault). A scenario named that
// needs the framed protocol is an error over raw, unless the protocol is
// the user's own (other), where it is reported not applicable.
func parseScenarios(s string, e scenario.Env) ([]string, error) {
	var out []string
	if s == "" || s == "all" || s == "mixed" {
		for i := range scenario.All {
			if sp := &scenario.All[i]; sp.InDefault(e) {
				out = append(out, sp.Name)
			}
		}
		return out, nil
	}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		sp := scenario.Lookup(n)
		switch {
		case n == "all" || n == "mixed":
			return nil, fmt.Errorf("%w: -scenario all means every scenario that applies; do not combine it with others", errUsage)
		case sp == nil:
			return nil, fmt.Errorf("%w: -scenario %q: want all or some of %s", errUsage, n, strings.Join(scenario.Names(), ", "))
		case sp.Framed && e.Proto != scenario.Framed && !e.OtherProtocol:
			return nil, fmt.Errorf("%w: -scenario %s needs -proto framed", errUsage, n)
		case slices.Contains(out, n):
			return nil, fmt.Errorf("%w: -scenario %s given twice", errUsage, n)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b string) int { return scenario.Index(a) - scenario.Index(b) })
	return out, nil
}

// checkTimeouts rejects timeout and rate flags a chosen scenario that
// applies cannot work with (scenario.Spec.CheckFlags).
func checkTimeouts(o *options) error {
	e := env(o)
	for _, s := range o.scenarios {
		if sp := scenario.Lookup(s); sp.NotApplicable(e) == "" {
			if why := sp.CheckFlags(e); why != "" {
				return fmt.Errorf("%w: %s", errUsage, why)
			}
		}
	}
	return nil
}

// Defaults of the server limits the memory bound is derived from: those
// of netserver.Limits, and the fixed allowance.
const (
	defaultOutputLimit  = netserver.DefaultOutputHard
	defaultUnackedLimit = netserver.DefaultUnackedBytes
	defaultMemAllowance = 32 << 20
	// floodMargin is how many connections beyond -max-conns connflood
	// opens by default.
	floodMargin = 200
)

// checkHostile validates the hostile scenarios' flags and fills in the
// defaults that depend on others (set: the flags given).
func checkHostile(o *options, set map[string]bool) error {
	for name, n := range map[string]int{"nonreader-conns": o.nonreaders, "splitter-conns": o.splitters, "pingflood-conns": o.pingflooders,
		"garbage-conns": o.garbageConns, "flood-conns": o.floodConns, "max-conns": o.maxConns} {
		if n < 0 {
			return fmt.Errorf("%w: -%s %d is negative", errUsage, name, n)
		}
	}
	switch {
	case o.hostileBytes < 1:
		return fmt.Errorf("%w: -hostile-bytes %d: want at least 1", errUsage, o.hostileBytes)
	case o.outputLimit < 0 || o.unackedLimit < 0 || o.memAllowance < 0:
		return fmt.Errorf("%w: -output-limit, -unacked-limit and -mem-allowance must not be negative", errUsage)
	case o.serverPID < 0:
		return fmt.Errorf("%w: -server-pid %d is negative", errUsage, o.serverPID)
	case o.serverPID > 0 && o.addr == "":
		return fmt.Errorf("%w: -server-pid names an external server's process and needs -addr (an embedded server is this process)", errUsage)
	}
	for s, n := range map[string]int{scenario.Nonreader: o.nonreaders, scenario.Splitter: o.splitters, scenario.Pingflood: o.pingflooders, scenario.Garbage: o.garbageConns} {
		if n == 0 && slices.Contains(o.scenarios, s) {
			return fmt.Errorf("%w: -%s-conns 0: the %s scenario needs at least 1 connection (leave it out with -scenario)", errUsage, s, s)
		}
	}
	if slices.Contains(o.scenarios, scenario.Connflood) {
		if o.maxConns == 0 {
			return fmt.Errorf("%w: the connflood scenario needs -max-conns, the server's connection limit", errUsage)
		}
		if !set["flood-conns"] {
			o.floodConns = o.maxConns + floodMargin
		}
		if o.floodConns <= o.maxConns {
			return fmt.Errorf("%w: -flood-conns %d: want more than -max-conns (%d), or the flood stays within the limit", errUsage, o.floodConns, o.maxConns)
		}
	}
	// connflood holds its connections at most half the idle timeout, so
	// that the ones the server keeps do not die idle.
	o.floodHold = time.Second
	if t := o.timeouts.Idle; t > 0 {
		o.floodHold = min(o.floodHold, t/2)
	}
	return nil
}

// byteSize is a flag.Value of a byte count: a plain number, or one with a
// K, M or G suffix (KiB, MiB, GiB; "KiB", "MiB", "GiB" and "B" are
// accepted too).
type byteSize int64

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	v := int64(*b)
	for _, u := range []struct {
		s string
		n int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i"), int64(1)
	if num != "" {
		switch num[len(num)-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			num = num[:len(num)-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return fmt.Errorf("want a byte count such as 4096, 512K or 4MiB")
	}
	*b = byteSize(v * mult)
	return nil
}
