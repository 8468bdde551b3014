package main

import (
	"bytes"
	"context"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testnet"
)

// deadlineKind says from what a lineServer's request deadline runs.
type deadlineKind int

const (
	fromFirstByte deadlineKind = iota // a line must be whole within the deadline of its first byte: the slowloris defence
	fromLastByte                      // every byte restarts it: a read timeout, which a trickle holds open
	fromAccept                        // it runs from the accept, whatever comes: a close before any request deadline
)

// serveLineDeadline starts a line server on 127.0.0.1 that answers each
// whole line with "ok\n" and closes a connection whose line is not whole
// in time, as kind says, and returns its address; the test's cleanup
// stops it and waits for its goroutines.
func serveLineDeadline(t *testing.T, deadline time.Duration, kind deadlineKind) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn, _ uint64) {
		if kind == fromAccept {
			_ = c.SetReadDeadline(time.Now().Add(deadline))
		}
		var line []byte
		buf := make([]byte, 512)
		for {
			n, err := c.Read(buf)
			for _, b := range buf[:n] {
				switch {
				case kind == fromLastByte:
					_ = c.SetReadDeadline(time.Now().Add(deadline))
				case kind == fromFirstByte && len(line) == 0:
					_ = c.SetReadDeadline(time.Now().Add(deadline))
				}
				line = append(line, b)
				if b == '\n' {
					line = line[:0]
					if kind == fromFirstByte {
						_ = c.SetReadDeadline(time.Time{})
					}
					if _, err := c.Write([]byte("ok\n")); err != nil {
						return
					}
				}
			}
			if err != nil { // the peer's close, or the deadline
				return
			}
		}
	})
}

// TestEndToEnd_SlowlorisRaw: over raw, slowloris trickles a line without
// its end; a server whose request deadline runs from the first byte closes
// it on time, one that restarts it on every byte never does while the
// trickle goes on, and one that closes from the accept, before the
// trickle's deadline, is early.
func TestEndToEnd_SlowlorisRaw(t *testing.T) {
	const deadline = 300 * time.Millisecond
	args := func(addr string) []string {
		return []string{"-addr", addr, "-preset", "line", "-scenario", "slowloris", "-frame-timeout", deadline.String(),
			"-conns", "10", "-slack", "150ms", "-close-horizon", "600ms"}
	}
	t.Run("deadline from the first byte", func(t *testing.T) {
		r, out := e2e(t, args(serveLineDeadline(t, deadline, fromFirstByte))...)
		checkClosedBy(t, r, scenario.Slowloris, "eof", 10, out)
		assert.Contains(t, out, "frame 300ms", "the header shows the deadline given")
	})
	t.Run("deadline restarted by every byte", func(t *testing.T) {
		// The trickle ("ping\n" without its \n: the first byte, then 3
		// at 1/8, 3/8 and 5/8 of the deadline) ends 187.5 ms after its
		// start; the server closes 300 ms later, 187.5 ms late, beyond
		// the 150 ms slack.
		r, out := e2e(t, args(serveLineDeadline(t, deadline, fromLastByte))...)
		s := r.Scenario(scenario.Slowloris)
		require.NotNil(t, s)
		assert.Equal(t, 10, s.Closes.Late+s.Closes.Never, "a read timeout that the trickle restarts is no request deadline:\n%s", out)
		assert.Zero(t, s.Closes.Early, out)
		assert.GreaterOrEqual(t, s.Closes.FromStart.Min(), int64(deadline/8*5-10*time.Millisecond), "the close came a read timeout after the trickle's last byte:\n%s", out)
	})
	t.Run("deadline from the accept, shorter", func(t *testing.T) {
		r, out := e2e(t, args(serveLineDeadline(t, deadline/3, fromAccept))...)
		s := r.Scenario(scenario.Slowloris)
		require.NotNil(t, s)
		assert.Equal(t, 10, s.Closes.Early, "closed 200 ms before the deadline of the trickle:\n%s", out)
		assert.Contains(t, out, "10 of 10 closed EARLY, before their deadline")
		if r.Judge().NotJudged == 0 { // else the machine starved the server with the harness: exit status 3, checked by e2e
			assert.Positive(t, r.Judge().Failures, out)
		}
	})
}

// TestSlowlorisRaw_NotApplicable: without a request deadline to judge
// against, raw slowloris says why.
func TestSlowlorisRaw_NotApplicable(t *testing.T) {
	addr := serveLineDeadline(t, time.Second, fromFirstByte)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{name: "embedded raw echo", args: []string{"-proto", "raw", "-scenario", "slowloris"}, want: "the embedded raw echo server has no request deadline"},
		{name: "external, no deadline given", args: []string{"-addr", addr, "-preset", "line", "-scenario", "slowloris"}, want: "give it with -frame-timeout"},
		{name: "external, no deadline", args: []string{"-addr", addr, "-preset", "line", "-scenario", "slowloris", "-frame-timeout", "0"}, want: "give it with -frame-timeout"},
		{name: "a 1-byte message", args: []string{"-addr", addr, "-payload", "x", "-expect", "none", "-scenario", "slowloris", "-frame-timeout", "1s"}, want: "has none to hold back"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, realMain(ctx, append(tt.args, "-q"), &out, io.Discard), "nothing judged, nothing failed")
			assert.Contains(t, out.String(), "[slowloris] not applicable: ")
			assert.Contains(t, out.String(), tt.want)
		})
	}
}
