package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/loadtest/internal/attack"
)

func TestParseFlags_ProtocolErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "preset framed", args: []string{"-addr", "127.0.0.1:1", "-proto", "framed", "-preset", "redis"}, want: "-proto framed"},
		{name: "size and payload", args: []string{"-addr", "127.0.0.1:1", "-payload", "x", "-size", "3"}, want: "-size"},
		{name: "size and preset", args: []string{"-addr", "127.0.0.1:1", "-preset", "redis", "-size", "3"}, want: "-size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// -payload alone drives the embedded echo server, over the raw protocol.
func TestParseFlags_PayloadEmbeddedIsRaw(t *testing.T) {
	o, err := parseFlags([]string{"-payload", `hi\n`, "-scenario", "echo"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, attack.Raw, o.Proto)
	assert.Equal(t, "hi\n", string(o.Payload))
}

// A refused -addr fails at once, in one line, before any scenario starts.
func TestRun_UnreachableFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: refused
	var out bytes.Buffer
	lag := lagmeter.New(t)
	start := time.Now()
	err = realMain(context.Background(), []string{"-addr", addr, "-q"}, &out, io.Discard)
	require.ErrorIs(t, err, attack.ErrUnreachable)
	assert.Less(t, time.Since(start), attack.ProbeTimeout+lag.Slack(time.Second))
	assert.Contains(t, err.Error(), addr)
	assert.NotContains(t, err.Error(), "\n", "one line")
	assert.Empty(t, out.String(), "no report")
}

// serveLines runs a line server on 127.0.0.1: each line it reads it
// answers with "OK " and the line, written cut at random byte boundaries
// (down to a byte a write, two answers sometimes joined in one write).
func serveLines(t *testing.T) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn, i uint64) {
		_ = c.(*net.TCPConn).SetNoDelay(true)
		rng := rand.New(rand.NewPCG(i, 1))
		r := bufio.NewReader(c)
		var pending []byte
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			pending = append(append(pending, "OK "...), line...)
			if r.Buffered() > 0 && rng.IntN(2) == 0 {
				continue // joined with the next answer
			}
			for len(pending) > 0 {
				n := min(len(pending), 1+rng.IntN(4))
				if _, err := c.Write(pending[:n]); err != nil {
					return
				}
				pending = pending[n:]
			}
		}
	})
}

// A line protocol over real TCP, its answers cut at random: every message
// is answered once, none wrongly; the splitter, which needs an echo server,
// says not applicable; the header gives only the flags given.
func TestRun_LineProtocol(t *testing.T) {
	addr := serveLines(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := realMain(ctx, []string{"-addr", addr, "-payload", `hello\n`, "-expect", "OK ", "-scenario", "echo,churn,splitter,keepalive",
		"-conns", "20", "-rate", "200", "-duration", "500ms", "-churn-rate", "50", "-q"}, &out, io.Discard)
	require.NoError(t, err, out.String())
	text := out.String()
	assert.Contains(t, text, "server timeouts: none given; slack ")
	assert.Contains(t, text, `each message "hello\n"; an answer: "OK "`)
	header, _, _ := strings.Cut(text, "\n\n")
	assert.NotContains(t, header, "keepalive", "no netwheel defaults for an external server")
	assert.Contains(t, text, "[echo] ok")
	assert.Contains(t, text, "[churn] ok")
	assert.Contains(t, text, "[splitter] not applicable")
	assert.Contains(t, text, "[keepalive] not applicable: ")
	assert.Contains(t, text, "keepalive needs the framed protocol")
	lines := regexp.MustCompile(`messages: (\d+) sent, (\d+) answered, 0 lost`).FindAllStringSubmatch(text, -1)
	require.Len(t, lines, 2, "echo and churn count their messages, none lost, called answered (not echoed) for another protocol\n%s", text)
	for _, m := range lines {
		assert.Equal(t, m[1], m[2], "every message answered once\n%s", text)
		assert.NotEqual(t, "0", m[1])
	}
}

// serveSilent runs a server on 127.0.0.1 that reads and closes a
// connection after idle without a byte from it; answer, if not nil, is
// written (in two pieces) after each read.
func serveSilent(t *testing.T, idle time.Duration, answer []byte) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn, _ uint64) {
		buf := make([]byte, 4096)
		for {
			_ = c.SetReadDeadline(time.Now().Add(idle))
			if _, err := c.Read(buf); err != nil {
				return
			}
			if answer != nil {
				_, _ = c.Write(answer[:1])
				_, _ = c.Write(answer[1:])
			}
		}
	})
}

// A server that answers nothing (-expect none), or anything (-expect
// any), is still judged on its idle timeout; echo, which counts answers one
// by one, says not applicable.
func TestRun_UncountedAnswers(t *testing.T) {
	for _, tt := range []struct {
		expect string
		answer []byte
	}{
		{expect: "none"},
		{expect: "any", answer: []byte("whatever")},
	} {
		t.Run("expect="+tt.expect, func(t *testing.T) {
			addr := serveSilent(t, time.Second, tt.answer)
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := realMain(ctx, []string{"-addr", addr, "-payload", `x`, "-expect", tt.expect, "-scenario", "echo,idle",
				"-idle", "1s", "-conns", "10", "-q"}, &out, io.Discard)
			require.NoError(t, err, out.String())
			text := out.String()
			assert.Contains(t, text, "[echo] not applicable", text)
			assert.Contains(t, text, "[idle] ok: 10/10", text)
			assert.Contains(t, text, `10 expected to close by "idle": 10 on time`, text)
		})
	}
}

// A server taken for an echo server that echoes nothing gets a hint to
// say its protocol.
func TestRun_NotEchoHint(t *testing.T) {
	addr := serveSilent(t, 5*time.Second, nil)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := realMain(ctx, []string{"-addr", addr, "-proto", "raw", "-scenario", "idle", "-idle", "1s", "-conns", "5", "-q"}, &out, io.Discard)
	require.ErrorIs(t, err, attack.ErrUnreachable, "the probe found no answer")
	assert.Contains(t, err.Error(), "or speak another protocol (say what it answers with -preset, or -payload and -expect")
	assert.Empty(t, out.String(), "one line, no report")
}
