// Package scenario says, in one table, what each scenario of the load-test
// harness is: its name, its connections' roles, the close it expects of
// the server, the protocol and flags it needs, when it does not apply and
// how it is judged. The command (flags, plan), the engine (attack), the
// judge and every renderer (report) read this table; none decides these
// things on its own.
//
// A Spec is immutable; the table and Lookup may be used from any
// goroutine.
package scenario

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Proto is the wire protocol the harness's clients speak.
type Proto uint8

// Protocols.
const (
	Raw    Proto = iota // bytes answered as the server's protocol says (an echo by default)
	Framed              // docs/protocol.md
)

func (p Proto) String() string {
	if p == Framed {
		return "framed"
	}
	return "raw"
}

// Scenario names, in report order.
const (
	Echo       = "echo"
	Idle       = "idle"
	Handshake  = "handshake"
	Keepalive  = "keepalive"
	Retransmit = "retransmit"
	Slowloris  = "slowloris"
	Churn      = "churn"
	Nonreader  = "nonreader"
	Splitter   = "splitter"
	Pingflood  = "pingflood"
	Connflood  = "connflood"
	Garbage    = "garbage"
	// Sourceflood: one source floods, the others must still get in
	// (needs -proxy to play many sources).
	Sourceflood = "sourceflood"
)

// Roles a connection plays besides its scenario's own name.
const (
	RoleSurvivor      = "survivor"    // keepalive: answers pings, must stay open
	RoleSilent        = "silent"      // keepalive: goes silent, must be closed as a dead peer
	RoleReading       = "reading"     // pingflood: reads the PONGs
	RoleNotReading    = "not_reading" // pingflood: never reads
	GarbageRandom     = "random"      // garbage: random bytes
	GarbageBadType    = "bad_type"    // garbage, framed: a frame of an unknown type
	GarbageHugeLength = "huge_length" // garbage, framed: a 0xFFFFFFF0 length prefix
	RoleFlooder       = "flooder"     // sourceflood: the one source that opens connections without end
	RoleNeighbour     = "neighbour"   // sourceflood: another source, which must get in and be answered
)

// Env is what is known of a run when the scenarios are chosen: the
// protocol, the server's answers, and what the flags told of the server.
type Env struct {
	Proto    Proto
	External bool // a server at -addr, not the embedded one
	// EchoAnswers: the server's answers are echoes of the messages;
	// CountedAnswers: they can be told apart and counted one per message
	// (not for -expect any or none).
	EchoAnswers, CountedAnswers bool
	// OtherProtocol: -payload, -expect or -preset describe a raw protocol
	// of the user's.
	OtherProtocol bool
	Expect        string // -expect as given, for the reasons' text
	Size          int    // bytes of a message
	// What the flags told of the server: its handshake timeout, its
	// request (frame) deadline (an external raw server's: only if
	// given), its connection limit (0: none known).
	Handshake, Frame time.Duration
	MaxConns         int
	// Proxy: the harness plays a balancer, each connection's PROXY header
	// naming a client of its own (-proxy); MaxConnsPerSource is the
	// server's per-source limit (0: none known).
	Proxy             bool
	MaxConnsPerSource int
	// Nonreader's flood per connection and the server's output limits it
	// must exceed to be judged.
	HostileBytes, OutputLimit, UnackedLimit int64

	// The timeouts the scenarios are judged against (the flags, or the
	// harness's defaults), and what is known of the server's own
	// (Known*: an external server's only as far as the flags gave them):
	// each scenario's flag check reads them.
	Idle, KnownIdle, KeepaliveTime, KeepaliveTimeout time.Duration
	DeadPeerAfter, KnownDeadPeerAfter                time.Duration
	// Ladder and GiveUp are the retransmissions' and the give-up's
	// expected offsets the flags give, or LadderErr why they give none.
	Ladder    []time.Duration
	GiveUp    time.Duration
	LadderErr error
	Rate      float64 // messages/s per connection
	Closed    bool    // closed loop
}

// MustClose says, for a hostile scenario whose every connection the
// server must close, what its connections are called in a verdict, why
// the server must close them, the reasons a framed server's CLOSE frame
// may give (none: any close counts), and the least time a connection
// waits for the close.
type MustClose struct {
	What, Why string
	Reasons   []string
}

// GarbageWaitMin is the least time a garbage connection waits for the
// server's close, and so the least window the judge allows a close of a
// hostile connection.
const GarbageWaitMin = time.Second

// Spec is one scenario.
type Spec struct {
	Name    string
	Hostile bool   // judged by what the server did with misbehaving peers
	Doc     string // what its connections do, for -h
	// Framed: it needs the framed protocol's PINGs, acknowledged DATA or
	// frames.
	Framed bool
	// Expect is the close reason its expecting roles' connections must get
	// from a server timeout ("" none); ExpectRole says which roles expect
	// it ("" every role).
	Expect, ExpectRole string
	// Timeouts are the flags of the server's timeouts it is judged
	// against (an external server's default is assumed when not given).
	Timeouts []string
	// Answered: its connections count the server's answers (polite
	// traffic, judged by lost messages).
	Answered bool
	// FillsOutput: some of its connections never read, so the server's
	// output to them may pile up (the memory bound counts their limits).
	FillsOutput bool
	// Alone: it runs after every other scenario, by itself (connflood).
	Alone bool
	// RefusalsExpected: the server refusing its connections is what it
	// tests, not a failed check (connflood).
	RefusalsExpected bool
	MustClose        *MustClose
	// LimitRole is the role whose connections held open Limit bounds
	// ("": every connection; sourceflood: the flooding source's).
	LimitRole string
	// ServedRole is a role every connection of which must get in, be
	// answered and be held open to the end, whatever the others do
	// (sourceflood: the other sources).
	ServedRole string
	// role returns connection i's role (nil: the scenario's name).
	role func(p Proto, i int) string
	// quiet reports whether connection i waits at the quiet barrier and
	// sends its last message on the spread schedule.
	quiet func(i int) bool
	// notApplicable returns why the scenario cannot be judged in env ("":
	// it can), beyond needing the framed protocol.
	notApplicable func(e Env) string
	// byDefault reports whether the default set includes it, when it
	// applies (nil: always).
	byDefault func(e Env) bool
	// flags returns why the flags in e cannot run it ("": they can).
	flags func(e Env) string
}

// Role returns connection i's role in scenario s over protocol p.
func (s *Spec) Role(p Proto, i int) string {
	if s.role == nil {
		return s.Name
	}
	return s.role(p, i)
}

// Quiet reports whether connection i of s waits at the quiet barrier.
func (s *Spec) Quiet(i int) bool { return s.quiet != nil && s.quiet(i) }

// Expects reports whether a connection in role expects a close.
func (s *Spec) Expects(role string) bool {
	return s.Expect != "" && (s.ExpectRole == "" || s.ExpectRole == role)
}

// NotApplicable returns why s cannot be judged in env, or "" if it can.
func (s *Spec) NotApplicable(e Env) string {
	if s.Framed && e.Proto != Framed {
		return fmt.Sprintf("%s needs the framed protocol (docs/protocol.md): its PINGs, acknowledged DATA and frame deadline; this server speaks raw", s.Name)
	}
	if s.notApplicable != nil {
		return s.notApplicable(e)
	}
	return ""
}

// CheckFlags returns why the timeout and rate flags in e cannot run s,
// a usage error, or "" if they can. Call it only when s applies.
func (s *Spec) CheckFlags(e Env) string {
	if s.flags == nil {
		return ""
	}
	return s.flags(e)
}

// firstSend is how long after it opens a paced connection sends its first
// write at most: its phase in the pacer's interval (1/rate), and for a
// splitter, which joins up to 3 messages in a write, two intervals more.
func firstSend(rate float64, intervals int) time.Duration {
	return time.Duration(float64(intervals) * float64(time.Second) / rate)
}

// sendsBeforeHandshake says why paced connections that send their first
// write up to intervals/-rate after they open would be closed by the
// handshake timeout first, or "".
func sendsBeforeHandshake(name string, e Env, intervals int) string {
	if e.Handshake > 0 && !e.Closed && firstSend(e.Rate, intervals) >= e.Handshake {
		return fmt.Sprintf("%s's connections send their first write up to %d/-rate (%s) after they open, not before -handshake (%s): the server would close them first; raise -rate",
			name, intervals, firstSend(e.Rate, intervals), e.Handshake)
	}
	return ""
}

// InDefault reports whether the default set (-scenario all, or none
// given) includes s in env: only if it applies, and what its own rule
// says (a limit or timeout it needs was given).
func (s *Spec) InDefault(e Env) bool {
	return s.NotApplicable(e) == "" && (s.byDefault == nil || s.byDefault(e))
}

// Lookup returns the named scenario's Spec, or nil.
func Lookup(name string) *Spec {
	for i := range All {
		if All[i].Name == name {
			return &All[i]
		}
	}
	return nil
}

// Names returns every scenario's name, in report order.
func Names() []string {
	out := make([]string, len(All))
	for i, s := range All {
		out[i] = s.Name
	}
	return out
}

// Parse parses -scenario: a comma-separated list in any order, returned
// in report order, or all (the default; mixed is its old name): every
// scenario in the default set (Spec.InDefault). A scenario named that
// needs the framed protocol is an error over raw, unless the protocol is
// the user's own (e.OtherProtocol), where it is reported not applicable.
func Parse(s string, e Env) ([]string, error) {
	named := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		sp := Lookup(n)
		switch {
		case s == "" || s == "all" || s == "mixed":
		case n == "all" || n == "mixed":
			return nil, errors.New("-scenario all means every scenario that applies; do not combine it with others")
		case sp == nil:
			return nil, fmt.Errorf("-scenario %q: want all or some of %s", n, strings.Join(Names(), ", "))
		case sp.Framed && e.Proto != Framed && !e.OtherProtocol:
			return nil, fmt.Errorf("-scenario %s needs -proto framed", n)
		case named[n]:
			return nil, fmt.Errorf("-scenario %s given twice", n)
		default:
			named[n] = true
		}
	}
	var out []string
	for i := range All {
		if sp := &All[i]; named[sp.Name] || len(named) == 0 && sp.InDefault(e) {
			out = append(out, sp.Name)
		}
	}
	return out, nil
}

// Check returns why the flags in e cannot run one of the named
// scenarios that applies (Spec.CheckFlags), or "".
func Check(names []string, e Env) string {
	for _, n := range names {
		if sp := Lookup(n); sp.NotApplicable(e) == "" {
			if why := sp.CheckFlags(e); why != "" {
				return why
			}
		}
	}
	return ""
}

// Assumed returns a note for each of the named scenarios that applies
// whose timeouts (Spec.Timeouts) the flags did not all give (given: the
// flags given): it is judged against the harness's defaults, which an
// external server's own may not match.
func Assumed(names []string, e Env, given map[string]bool) []string {
	var notes []string
	for _, n := range names {
		if sp := Lookup(n); sp.NotApplicable(e) == "" {
			var missing []string
			for _, name := range sp.Timeouts {
				if !given[name] {
					missing = append(missing, "-"+name)
				}
			}
			if len(missing) > 0 {
				notes = append(notes, fmt.Sprintf("%s: judged against the harness's default %s (not given: the server's own may differ)", n, strings.Join(missing, ", ")))
			}
		}
	}
	return notes
}
