package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// parseExchange sets o.Payload and o.Expect from -payload, -expect and
// -preset (set: the flags given; attack.ParseExchange): raw only.
func parseExchange(o *options, payload, expect, preset string, set map[string]bool) error {
	if !set["payload"] && !set["expect"] && !set["preset"] {
		return nil
	}
	if o.Proto != attack.Raw {
		return fmt.Errorf("%w: -payload, -expect and -preset describe a raw protocol; they cannot be used with -proto framed", errUsage)
	}
	if (set["payload"] || set["preset"]) && set["size"] {
		return fmt.Errorf("%w: -size is the length of the default payload; with -payload or -preset, leave it out", errUsage)
	}
	given := func(name string, v *string) *string {
		if !set[name] {
			return nil // not given: the preset's, or the default
		}
		return v
	}
	msg, e, err := attack.ParseExchange(given("preset", &preset), given("payload", &payload), given("expect", &expect), o.Addr)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if o.Expect = e; msg != nil {
		o.Payload, o.Size = msg, len(msg)
	}
	return nil
}

// env is what the scenario table needs to know of the run o describes.
func env(o *options) scenario.Env {
	e := scenario.Env{Proto: o.Proto, External: o.Addr != "", EchoAnswers: o.Expect.Kind == attack.AnswerEcho,
		CountedAnswers: o.Expect.Counted(), OtherProtocol: o.Payload != nil || o.Expect.Kind != attack.AnswerEcho,
		Expect: o.Expect.String(), Size: o.Size, Handshake: o.Timeouts.Handshake, Frame: o.Timeouts.Frame, MaxConns: o.maxConns,
		HostileBytes: o.HostileBytes, OutputLimit: o.bound.OutputLimit, UnackedLimit: o.bound.UnackedLimit,
		Proxy: o.Proxy.Version != 0, MaxConnsPerSource: o.maxConnsPerSource}
	t, known := o.Timeouts, o.Timeouts
	if o.known != nil {
		known = *o.known
		e.Frame = known.Frame // an external server's request deadline: only if given
	}
	e.Idle, e.KnownIdle, e.KeepaliveTime, e.KeepaliveTimeout = t.Idle, known.Idle, t.KeepaliveTime, t.KeepaliveTimeout
	e.DeadPeerAfter, e.KnownDeadPeerAfter, e.Rate, e.Closed = t.DeadPeerAfter(), known.DeadPeerAfter(), o.Rate, o.Closed
	e.Ladder, e.GiveUp, e.LadderErr = attack.Ladder(t)
	return e
}

// notApplicable returns why scenario s cannot be judged in the run o
// describes, or "" (scenario.Spec.NotApplicable).
func notApplicable(o *options, s string) string { return scenario.Lookup(s).NotApplicable(env(o)) }

// floodMargin is how many connections beyond -max-conns connflood opens
// by default.
const floodMargin = 200

// checkHostile validates the hostile scenarios' flags and -proxy-clients,
// and fills in the defaults that depend on others (set: the flags given).
func checkHostile(o *options, set map[string]bool) error {
	if set["proxy-clients"] && o.Proxy.Version == 0 {
		return fmt.Errorf("%w: -proxy-clients needs -proxy v1 or v2", errUsage)
	}
	if slices.Contains(o.Scenarios, scenario.Sourceflood) {
		if why := notApplicable(o, scenario.Sourceflood); why != "" {
			return fmt.Errorf("%w: %s", errUsage, why)
		}
		if err := floodBeyond(o.hostileConns[scenario.Sourceflood], "sourceflood-conns", o.maxConnsPerSource, "max-conns-per-source", set); err != nil {
			return err
		}
	}
	for s, n := range o.hostileConns {
		if *n == 0 && !scenario.Lookup(s).Alone && slices.Contains(o.Scenarios, s) {
			return fmt.Errorf("%w: -%s-conns 0: want at least 1 connection, or leave the %s scenario out", errUsage, s, s)
		}
	}
	switch {
	case o.HostileBytes < 1:
		return fmt.Errorf("%w: -hostile-bytes %d: want at least 1", errUsage, o.HostileBytes)
	case o.serverPID > 0 && o.Addr == "":
		return fmt.Errorf("%w: -server-pid names an external server's process and needs -addr (an embedded server is this process)", errUsage)
	}
	if slices.Contains(o.Scenarios, scenario.Connflood) {
		if o.maxConns == 0 {
			return fmt.Errorf("%w: the connflood scenario needs -max-conns, the server's connection limit", errUsage)
		}
		if err := floodBeyond(o.hostileConns[scenario.Connflood], "flood-conns", o.maxConns, "max-conns", set); err != nil {
			return err
		}
	}
	// connflood holds its connections at most half the idle timeout, so
	// that the ones the server keeps do not die idle.
	o.FloodHold = time.Second
	if t := o.Timeouts.Idle; t > 0 {
		o.FloodHold = min(o.FloodHold, t/2)
	}
	return nil
}

// floodBeyond gives a flood's connection count (-connsFlag) its default,
// the server's limit (-limitFlag) plus floodMargin, unless given (set),
// and checks that it exceeds the limit.
func floodBeyond(conns *int, connsFlag string, limit int, limitFlag string, set map[string]bool) error {
	if !set[connsFlag] {
		*conns = limit + floodMargin
	}
	if *conns <= limit {
		return fmt.Errorf("%w: -%s %d: want more than -%s (%d), or the flood stays within the limit", errUsage, connsFlag, *conns, limitFlag, limit)
	}
	return nil
}
