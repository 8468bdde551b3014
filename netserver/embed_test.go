package netserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// codeCloser closes a connection with CloseCode(code, text): at open, or on
// its first message.
type codeCloser struct {
	code    uint16
	text    string
	atOpen  bool
	reasons chan netserver.Reason // OnClose's reason, per connection
}

func (h *codeCloser) OnOpen(c *netserver.Conn) {
	if h.atOpen {
		c.CloseCode(h.code, h.text)
	}
}

func (h *codeCloser) OnMessage(c *netserver.Conn, _ []byte) { c.CloseCode(h.code, h.text) }

func (h *codeCloser) OnClose(_ *netserver.Conn, r netserver.Reason) { h.reasons <- r }

// TestFramed_CloseCode: a handler's CloseCode reaches a Framed peer, on real
// TCP, as the last frame before EOF, a CLOSE with the handler's code and
// text (cut to frame.MaxReasonLen bytes at a rune boundary); the server
// sees ReasonApplication in OnClose, Stats and the metrics, and only the
// log carries the code and text.
func TestFramed_CloseCode(t *testing.T) {
	long := "x" + strings.Repeat("é", 200) // 401 bytes; byte 256 is inside an é
	for _, tc := range []struct {
		name     string
		code     uint16
		text     string
		atOpen   bool
		wantText string
	}{
		{name: "on a message", code: 4001, text: "session over", wantText: "session over"},
		{name: "at open", code: 1000, text: "go away", atOpen: true, wantText: "go away"},
		{name: "text cut to MaxReasonLen", code: 65535, text: long, wantText: long[:frame.MaxReasonLen-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var logs bytes.Buffer
			h := &codeCloser{code: tc.code, text: tc.text, atOpen: tc.atOpen, reasons: make(chan netserver.Reason, 1)}
			s := start(t, netserver.Config{
				Protocol: netserver.Framed,
				Logger:   slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil)),
			}, h)
			c := dial(t, s)
			if !tc.atOpen {
				c.Push(frame.AppendData(nil, 1, []byte("close me")))
			}
			frames, _, err := readUntilClosed(c, 5*time.Second)
			require.NoError(t, err, "the server must end the connection after its CLOSE")
			require.NotEmpty(t, frames, "no CLOSE frame before EOF")
			last := frames[len(frames)-1]
			require.Equal(t, frame.TypeClose, last.Type, "the last frame before EOF: %+v", frames)
			assert.Equal(t, frame.Code(tc.code), last.Code)
			assert.Equal(t, tc.wantText, string(last.Reason))
			for _, f := range frames[:len(frames)-1] {
				assert.NotEqual(t, frame.TypeData, f.Type, "nothing was sent but the CLOSE")
			}

			select {
			case r := <-h.reasons:
				assert.Equal(t, netserver.ReasonApplication, r, "OnClose's reason")
			case <-time.After(5 * time.Second):
				t.Fatal("OnClose was not called")
			}
			assert.Equal(t, map[string]int64{"application": 1}, s.Stats().Closed)
			assert.Equal(t, 1.0, closedMetric(t, s, "application"))

			// The code and text are in the log, and nowhere else the
			// server reports (OnClose has the reason only).
			mu.Lock()
			out := logs.String()
			mu.Unlock()
			var found bool
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var rec map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
				if rec["msg"] == "netserver: handler closed a connection" {
					found = true
					assert.Equal(t, float64(tc.code), rec["code"])
					assert.Equal(t, tc.wantText, rec["text"])
				}
			}
			assert.True(t, found, "CloseCode logs the code and text: %s", out)
		})
	}
}

// closedMetric reads netwheel_connections_closed_total for reason from the
// server's metrics endpoint.
func closedMetric(t *testing.T, s *netserver.Server, reason string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	prefix := `netwheel_connections_closed_total{reason="` + reason + `"} `
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	t.Fatalf("no %s in the metrics", prefix)
	return 0
}

// hello is a Raw line protocol whose handshake is a "HELLO" line, marked
// by the handler (Config.HandlerMarks): other bytes before it do not
// complete it. "HELLO" is answered "WELCOME", "PING" "PONG"; both are
// activity.
type hello struct {
	mu      sync.Mutex
	reasons map[string]netserver.Reason // by the peer's address
}

func (*hello) OnOpen(*netserver.Conn) {}

func (*hello) OnStream(c *netserver.Conn, in []byte) (consumed int) {
	for {
		i := bytes.IndexByte(in[consumed:], '\n')
		if i < 0 {
			return consumed
		}
		line := string(in[consumed : consumed+i])
		consumed += i + 1
		switch line {
		case "HELLO":
			c.HandshakeDone()
			c.Activity()
			_ = c.Send([]byte("WELCOME\n"))
		case "PING":
			c.Activity()
			_ = c.Send([]byte("PONG\n"))
		}
	}
}

func (h *hello) OnClose(c *netserver.Conn, r netserver.Reason) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reasons[c.RemoteAddr().String()] = r
}

// reason reports the reason the connection from the client closed with, or
// ReasonNone while it is open.
func (h *hello) reason(c *testpeer.Peer) netserver.Reason {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reasons[c.LocalAddr().String()]
}

// awaitEOF reads c's bytes, through r, until the server closes it and
// reports when.
func awaitEOF(t *testing.T, c *testpeer.Peer, r io.Reader, timeout time.Duration) time.Time {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(timeout)))
	if _, err := io.Copy(io.Discard, r); err != nil && !testpeer.Closed(err) {
		t.Fatalf("waiting for the server to close: %v", err)
	}
	return time.Now()
}

// TestRaw_HandshakeWithHandlerMarks: with HandlerMarks, a Raw connection's
// handshake is done when the handler says so, not at its first byte. A peer
// that sends bytes but never the handshake line is closed with the
// handshake reason, never before the timeout; one whose handler called
// HandshakeDone stays open well past it, until the idle timeout reaps it.
func TestRaw_HandshakeWithHandlerMarks(t *testing.T) {
	const (
		handshake   = 300 * time.Millisecond
		idleTimeout = 700 * time.Millisecond
		slack       = time.Second // a quiet machine's lateness: a tick, scheduling, -race
	)
	h := &hello{reasons: map[string]netserver.Reason{}}
	s := start(t, netserver.Config{
		HandlerMarks: true,
		Timeouts:     idle.Config{HandshakeTimeout: handshake, IdleTimeout: idleTimeout},
	}, h)

	lag := lagmeter.New(t)
	stranger := dial(t, s)
	stranger.Push([]byte("hi\n")) // bytes, and a whole line, but not the handshake

	// The stranger is closed by the handshake timeout, not earlier.
	at := awaitEOF(t, stranger, stranger, waitFor)
	assert.GreaterOrEqual(t, at.Sub(stranger.Dialed), handshake, "closed before the handshake timeout")
	assert.Less(t, at.Sub(stranger.Dialed), handshake+lag.Slack(slack), "closed too late")
	require.Eventually(t, func() bool { return h.reason(stranger) != netserver.ReasonNone }, waitFor, time.Millisecond)
	assert.Equal(t, netserver.ReasonHandshake, h.reason(stranger))

	// The greeter's PING must reach the server before its idle timeout: a
	// greeter whose test was kept off the CPU longer than that margin is
	// rightly reaped first, checks nothing, and is tried again.
	idles := int64(0)
	for attempt := 1; ; attempt++ {
		idles++
		if greet(t, s, h, handshake, idleTimeout, slack) {
			break
		}
		require.Less(t, attempt, 4, "the test was kept off the CPU past the idle timeout in every attempt")
	}
	assert.Equal(t, map[string]int64{"handshake": 1, "idle": idles}, s.Stats().Closed)
}

// greet is TestRaw_HandshakeWithHandlerMarks's greeter: it does the
// handshake, is still open past the handshake deadline, and is then reaped
// by the idle timeout. It returns false, having checked nothing more, when
// its PING came after the idle deadline because the test was kept off the
// CPU long enough (lagmeter's Worst) for that.
func greet(t *testing.T, s *netserver.Server, h *hello, handshake, idleTimeout, slack time.Duration) bool {
	t.Helper()
	lag := lagmeter.New(t)
	greeter := dial(t, s)
	greeter.Push([]byte("HELLO\n"))
	r := bufio.NewReader(greeter)
	require.NoError(t, greeter.SetReadDeadline(time.Now().Add(waitFor)))
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "WELCOME\n", line)

	// Still open well past its handshake deadline.
	margin := idleTimeout - handshake - 200*time.Millisecond
	time.Sleep(time.Until(greeter.Dialed.Add(handshake + 200*time.Millisecond)))
	last := time.Now() // before the PING: the server's activity is after it
	greeter.Push([]byte("PING\n"))
	line, err = r.ReadString('\n')
	if lag.Worst() >= margin && (err != nil || h.reason(greeter) != netserver.ReasonNone) {
		t.Logf("the PING went %v after the dial, with a stall of %v: reaped first (%v), again",
			last.Sub(greeter.Dialed), lag.Worst(), h.reason(greeter))
		awaitEOF(t, greeter, r, waitFor)
		require.Eventually(t, func() bool { return h.reason(greeter) != netserver.ReasonNone }, waitFor, time.Millisecond)
		require.Equal(t, netserver.ReasonIdle, h.reason(greeter))
		return false
	}
	require.NoError(t, err, "the greeter was closed (reason %v)", h.reason(greeter))
	assert.Equal(t, "PONG\n", line)

	// And then the idle timeout reaps it.
	at := awaitEOF(t, greeter, r, waitFor)
	if lag.Worst() >= margin && at.Sub(last) < idleTimeout {
		t.Logf("the PING went %v after the dial, with a stall of %v: reaped %v after it, again",
			last.Sub(greeter.Dialed), lag.Worst(), at.Sub(last))
		return false
	}
	assert.GreaterOrEqual(t, at.Sub(last), idleTimeout, "closed before the idle timeout")
	assert.Less(t, at.Sub(last), idleTimeout+lag.Slack(slack), "closed too late")
	require.Eventually(t, func() bool { return h.reason(greeter) != netserver.ReasonNone }, waitFor, time.Millisecond)
	assert.Equal(t, netserver.ReasonIdle, h.reason(greeter))
	return true
}
