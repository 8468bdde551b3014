package netserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

func TestMain(m *testing.M) {
	if os.Getenv(floodChildEnv) != "" {
		os.Exit(floodChild())
	}
	goleak.VerifyTestMain(m,
		// gnet's shared worker pool (ants) keeps a purge goroutine for the
		// life of the process; it is not ours and not per server.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

// waitFor bounds a wait for something that must come (a frame, a count):
// it detects a hang and measures nothing. A machine whose other processes
// take the CPU may keep a test from running for seconds, so it is long; a
// test that passes does not wait it out.
const waitFor = 10 * time.Second

// start runs a server for the test and shuts it down at the end.
func start(t testing.TB, cfg netserver.Config, h netserver.ConnHandler) *netserver.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.EventLoops == 0 {
		cfg.EventLoops = 2
	}
	if h == nil {
		h = netserver.Echo{}
	}
	s, err := netserver.New(cfg, h)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, s.Shutdown(ctx))
	})
	return s
}

// client is a test's connection to a server. For the framed protocol it
// reads through frame.Conn, with the Conn's own replies off, so that the
// test writes every frame it means the server to get, malformed ones
// included, with frame's encoders (write).
type client struct {
	t     *testing.T
	c     net.Conn
	fc    *frame.Conn // reads the server's frames (next); writes nothing
	start time.Time
}

func dial(t *testing.T, s *netserver.Server) *client {
	t.Helper()
	return dialMax(t, s, 0)
}

// dialMax is dial for a client that accepts frames of length up to max (0:
// frame.DefaultMax).
func dialMax(t *testing.T, s *netserver.Server, max int) *client {
	t.Helper()
	// Taken before the dial: the server may accept, and start the
	// connection's timers, before Dial returns here, so only a time from
	// before the dial is a lower bound for a deadline counted from the open.
	start := time.Now()
	c, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return newClient(t, c, start, max)
}

// newClient returns a client over c, dialed at start.
func newClient(t *testing.T, c net.Conn, start time.Time, max int) *client {
	fc := frame.NewConn(c, max)
	fc.SetReplies(0)
	return &client{t: t, c: c, fc: fc, start: start}
}

// write writes b, as it is, to the server.
func (c *client) write(b []byte) {
	c.t.Helper()
	_, err := c.c.Write(b)
	require.NoError(c.t, err)
}

// next reads the next frame, failing after timeout. io.EOF means the server
// closed the connection.
func (c *client) next(timeout time.Duration) (frame.Frame, error) {
	c.t.Helper()
	require.NoError(c.t, c.c.SetReadDeadline(time.Now().Add(timeout)))
	f, err := c.fc.Next()
	if err != nil {
		return frame.Frame{}, err
	}
	f.Payload = append([]byte(nil), f.Payload...)
	f.Reason = append([]byte(nil), f.Reason...)
	return f, nil
}

// closeFrame reads until the server's CLOSE and EOF, and reports the CLOSE
// code and when the connection ended.
func (c *client) waitClose(timeout time.Duration) (frame.Code, time.Time) {
	c.t.Helper()
	var code frame.Code
	for {
		f, err := c.next(timeout)
		if err != nil {
			if errors.Is(err, io.EOF) || isReset(err) {
				return code, time.Now()
			}
			c.t.Fatalf("waiting for the server to close: %v", err)
		}
		if f.Type == frame.TypeClose {
			code = f.Code
		}
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}
