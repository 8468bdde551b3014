package main

import (
	"bytes"
	"context"
	"github.com/netwheel/netwheel/loadtest/internal/embedded"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// checkClosedBy asserts that every connection of a timer scenario was
// closed on time, never early, by the end given, unless the report says
// the harness was starved (exit status 3, which e2e checks).
func checkClosedBy(t *testing.T, r *report.Result, name, end string, n int, out string) {
	t.Helper()
	s := r.Scenario(name)
	require.NotNil(t, s, out)
	assert.Equal(t, n, s.Opened, out)
	assert.Zero(t, s.Closes.Early, "%s: never early:\n%s", name, out)
	assert.GreaterOrEqual(t, s.Closes.FromStart.Min(), -int64(time.Millisecond), "%s: never early:\n%s", name, out)
	if r.Judge().NotJudged > 0 {
		assert.True(t, r.SelfLag.Starved(), "not judged only when starved:\n%s", out)
		return
	}
	assert.Equal(t, n, s.Closes.Expected, "%s: every connection expects a close:\n%s", name, out)
	assert.Equal(t, n, s.Closes.OnTime, "%s: all closed on time:\n%s", name, out)
	assert.Equal(t, n, s.Ends[end], "%s: closed as %s:\n%s", name, end, out)
}

// TestEndToEnd_HandshakeEmbedded: the embedded server's handshake timeout
// is -handshake's, and the handshake scenario's silent connections are
// closed by it, raw (an EOF: the first byte would have completed it) and
// framed (a CLOSE saying handshake: no frame came).
func TestEndToEnd_HandshakeEmbedded(t *testing.T) {
	for _, tt := range []struct{ proto, end string }{{proto: "raw", end: "eof"}, {proto: "framed", end: "handshake"}} {
		t.Run(tt.proto, func(t *testing.T) {
			r, out := e2e(t, "-proto", tt.proto, "-scenario", "handshake", "-handshake", "250ms", "-conns", "10", "-slack", "300ms")
			assert.Equal(t, 250*time.Millisecond, r.Config.Timeouts.Handshake)
			assert.Contains(t, out, "handshake 250ms", "the header names it")
			checkClosedBy(t, r, scenario.Handshake, tt.end, 10, out)
			if r.Judge().NotJudged == 0 {
				assert.Equal(t, int64(10), r.Server.Closes["handshake"], "the server closed them by its handshake timeout")
			}
		})
	}
}

// TestEndToEnd_HandshakeBesideOthers: with a handshake timeout on the
// embedded server, the scenarios whose connections wait before their first
// frame prove themselves at once (an idle connection's first keep-alive, a
// slowloris's PING before its trickle): without that, the idle connections
// (first keep-alive at idle/3 = 500 ms) and the slowloris trickle (a frame
// never completed) would be closed by the 300 ms handshake timeout.
func TestEndToEnd_HandshakeBesideOthers(t *testing.T) {
	r, out := e2e(t, "-scenario", "idle,handshake,slowloris", "-handshake", "300ms", "-idle", "1500ms",
		"-frame-timeout", "800ms", "-conns", "10", "-slack", "300ms")
	checkClosedBy(t, r, scenario.Handshake, "handshake", 10, out)
	checkClosedBy(t, r, scenario.Idle, "idle", 10, out)
	checkClosedBy(t, r, scenario.Slowloris, "frame_deadline", 10, out)
}

// TestEndToEnd_HandshakeNever: a server without a handshake timeout keeps
// silent connections open: never closed within the horizon.
func TestEndToEnd_HandshakeNever(t *testing.T) {
	addr := startPlainEcho(t, 0)
	r, out := e2e(t, "-addr", addr, "-scenario", "handshake", "-handshake", "200ms", "-conns", "10",
		"-slack", "100ms", "-close-horizon", "400ms")
	s := r.Scenario(scenario.Handshake)
	require.NotNil(t, s)
	assert.Equal(t, 10, s.Closes.Never, out)
	assert.Contains(t, out, "10 of 10 not closed within 400ms of their deadline")
	assert.Contains(t, out, "handshake 200ms", "the header shows the timeout given")
	if r.Judge().NotJudged == 0 {
		assert.Contains(t, out, "[handshake] CHECK")
	}
}

// TestEndToEnd_HandshakeExternalUnknown: an external server's handshake
// timeout is judged only when given.
func TestEndToEnd_HandshakeExternalUnknown(t *testing.T) {
	addr := startPlainEcho(t, 0)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, realMain(ctx, []string{"-addr", addr, "-scenario", "handshake", "-q"}, &out, io.Discard), "nothing judged, nothing failed")
	assert.Contains(t, out.String(), "[handshake] not applicable: ")
	assert.Contains(t, out.String(), "the server's handshake timeout is not known: give it with -handshake")
	assert.Contains(t, out.String(), "server timeouts: none given", "no handshake timeout assumed")
}

func TestParseFlags_Handshake(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{name: "embedded without -handshake", args: []string{"-scenario", "handshake"}, want: "needs -handshake > 0"},
		{name: "not below idle", args: []string{"-scenario", "handshake", "-handshake", "2s"}, want: "below -idle"},
		{name: "framed: not below the dead-peer time", args: []string{"-scenario", "handshake", "-handshake", "1s", "-idle", "5s"}, want: "dead peers"},
		{name: "negative", args: []string{"-handshake", "-1s"}, want: "-handshake -1s: want 0 to 1h"},
		{name: "echo's first message after it", args: []string{"-scenario", "echo", "-handshake", "300ms", "-rate", "2"}, want: "raise -rate"},
		{name: "splitter's first write after it", args: []string{"-scenario", "splitter", "-handshake", "300ms", "-rate", "5"}, want: "3/-rate (600ms)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	o, err := parseFlags([]string{"-proto", "raw", "-scenario", "handshake", "-handshake", "1s", "-idle", "5s"}, io.Discard)
	require.NoError(t, err, "raw: no keepalive to die of")
	assert.Equal(t, time.Second, o.Timeouts.Handshake)
	_, err = parseFlags([]string{"-addr", "127.0.0.1:1", "-scenario", "handshake", "-handshake", "3s"}, io.Discard)
	require.NoError(t, err, "an external server's idle timeout, not given, is not assumed to come first")
	_, err = parseFlags([]string{"-addr", "127.0.0.1:1", "-scenario", "handshake", "-handshake", "3s", "-idle", "3s"}, io.Discard)
	require.ErrorContains(t, err, "below -idle", "one given is")
	o, err = parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.NotContains(t, o.Scenarios, scenario.Handshake, "not by default: the server's handshake timeout is not known")
	assert.Equal(t, time.Duration(idle.Off), embedded.Config(embeddedOptions(o)).Timeouts.HandshakeTimeout, "the embedded server has none unless -handshake gives it")
	o, err = parseFlags([]string{"-handshake", "300ms"}, io.Discard)
	require.NoError(t, err)
	assert.Contains(t, o.Scenarios, scenario.Handshake, "by default once it is known")
	assert.Equal(t, 300*time.Millisecond, embedded.Config(embeddedOptions(o)).Timeouts.HandshakeTimeout)
}

// TestEndToEnd_HandshakeAnyPreset: nothing is sent, so the handshake
// scenario judges a server of any protocol: here one that closes every
// connection 300 ms after it accepted it, whatever comes.
func TestEndToEnd_HandshakeAnyPreset(t *testing.T) {
	addr := serveLineDeadline(t, 300*time.Millisecond, fromAccept)
	for _, preset := range []string{"redis", "memcached", "http", "line"} {
		t.Run(preset, func(t *testing.T) {
			r, out := e2e(t, "-addr", addr, "-preset", preset, "-scenario", "handshake", "-handshake", "300ms",
				"-conns", "5", "-slack", "200ms", "-close-horizon", "1s")
			checkClosedBy(t, r, scenario.Handshake, "eof", 5, out)
		})
	}
}

// TestEndToEnd_HandshakeConnflood: with a handshake timeout on the
// embedded server, connflood's connections send a message at once, so the
// server keeps as many as its limit allows for the whole hold (1 s, beyond
// the 300 ms handshake timeout), rather than closing them all as silent.
func TestEndToEnd_HandshakeConnflood(t *testing.T) {
	for _, proto := range []string{"raw", "framed"} {
		t.Run(proto, func(t *testing.T) {
			r, out := e2e(t, "-proto", proto, "-scenario", "connflood", "-handshake", "300ms", "-max-conns", "20", "-flood-conns", "30")
			s := r.Scenario(scenario.Connflood)
			require.NotNil(t, s)
			assert.Equal(t, 20, s.Held(), "the limit's worth held to the end:\n%s", out)
			assert.Zero(t, s.Ends["handshake"], out)
		})
	}
}
