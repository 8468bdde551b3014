package attack

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// TestIdle_Refusal: a server at its connection limit says so and closes
// (memcached: "ERROR Too many open connections"): the connection is
// refused, in the server's words, and its close is no close to time,
// whether the words come before the client's message or as its answer.
func TestIdle_Refusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		readMsg bool // the server reads the client's message before it refuses
	}{
		{name: "before the message"},
		{name: "as the answer", readMsg: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveEach(t, func(c net.Conn) {
				if tc.readMsg {
					_, _ = c.Read(make([]byte, 64))
				}
				_, _ = c.Write([]byte("ERROR Too many open connections\r\n"))
				_ = c.Close()
			})
			e, err := ParseExpect("VERSION ")
			require.NoError(t, err)
			cfg := Config{Addr: addr, Proto: Raw, Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: 3},
				Payload: []byte("version\r\n"), Expect: e, Timeouts: report.Timeouts{Idle: time.Second, Slack: 100 * time.Millisecond}}
			_, results := runCollect(t, cfg, 3)
			require.Len(t, results, 3)
			s := report.NewScenario(scenario.Idle, "idle")
			for _, r := range results {
				assert.Equal(t, `"ERROR Too many open connections"`, r.Refusal)
				assert.True(t, r.ClosedAt.IsZero(), "no close to time")
				assert.Zero(t, r.Lost, "a refused message is not lost")
				s.Add(r, cfg.Timeouts, true)
			}
			assert.Equal(t, 3, s.Closes.Refused)
			assert.Equal(t, s.Closes.Expected, s.Closes.Sum(), "the counts add up")
			assert.Zero(t, s.Mismatch, "a refusal's bytes are not wrong answers")
			lines := verdict(s)
			require.Len(t, lines, 1, "the refusal only: no close timed, no wrong answer, nothing lost")
			assert.Contains(t, lines[0], `3 of 3 refused by the server before the scenario could start, saying "ERROR Too many open connections"`)
		})
	}
}

// TestTrickle_NoWriteAtTheDeadline: the slowloris trickle's bytes fall
// between the deadline's quarters, never at the deadline itself, where
// a byte would race the server's close and draw a reset.
func TestTrickle_NoWriteAtTheDeadline(t *testing.T) {
	for _, frame := range []time.Duration{40 * time.Millisecond, time.Second, 3 * time.Second} {
		every, first := trickle(frame)
		for k := range 8 {
			at := first + time.Duration(k)*every
			assert.NotEqual(t, frame, at, "frame %s: byte %d", frame, k)
			assert.Greater(t, (at - frame).Abs(), every/4, "frame %s: byte %d is well away from the deadline", frame, k)
		}
	}
}

func TestFirstLine(t *testing.T) {
	assert.Equal(t, `"-ERR max number of clients reached"`, firstLine([]byte("-ERR max number of clients reached\r\nmore")))
	assert.True(t, httpUnavailable([]byte("HTTP/1.1 503 Service Unavailable\r\n")))
	assert.False(t, httpUnavailable([]byte("HTTP/1.1 200 OK\r\n")))
	long := make([]byte, 200)
	for i := range long {
		long[i] = 'a'
	}
	assert.Len(t, firstLine(long), 85, "80 bytes, quoted, and an ellipsis")
}
