package netserver_test

import (
	"bytes"
	"encoding/json"
	"errors"
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
				c.write(frame.AppendData(nil, 1, []byte("close me")))
			}
			var frames []frame.Frame
			for {
				f, err := c.next(5 * time.Second)
				if errors.Is(err, io.EOF) || isReset(err) {
					break
				}
				require.NoError(t, err, "the server must end the connection after its CLOSE")
				frames = append(frames, f)
			}
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
