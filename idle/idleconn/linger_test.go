package idleconn_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/idle/idleconn"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/wheel"
)

// lingerConn is a net.Pipe end with a linger setting, as a TCP conn has.
// Its first Close reports the linger it ran under on closedWith.
type lingerConn struct {
	net.Conn
	linger     atomic.Int64
	closedWith chan int64
}

func newLingerConn(c net.Conn) *lingerConn {
	return &lingerConn{Conn: c, closedWith: make(chan int64, 1)}
}

func (c *lingerConn) SetLinger(sec int) error {
	c.linger.Store(int64(sec))
	return nil
}

func (c *lingerConn) Close() error {
	select {
	case c.closedWith <- c.linger.Load():
	default:
	}
	return c.Conn.Close()
}

// TestConn_ExpireResetsLinger: a timeout's close runs on the wheel's
// goroutine, inside Advance here, and must not wait; with a positive linger
// a TCP conn's Close waits for unsent data, up to the linger. The close must
// run with the linger set back to the default (-1), wherever it was set.
// The pipe has no descriptor, so this also covers a conn whose linger the
// close cannot read.
func TestConn_ExpireResetsLinger(t *testing.T) {
	for _, tc := range []struct {
		name     string
		aboveTLS bool // the wrapper wraps a *tls.Conn over the lingerConn
		viaConn  bool // set the linger through Conn.SetLinger, not on the lingerConn
	}{
		{name: "set through Conn", viaConn: true},
		{name: "set on the wrapped conn"},
		{name: "above TLS, set on the transport", aboveTLS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := wheel.NewManualClock()
			w := wheel.New(wheel.WithClock(clk))
			defer w.Stop()
			a, b := net.Pipe()
			defer b.Close()
			lc := newLingerConn(a)
			var inner net.Conn = lc
			if tc.aboveTLS {
				inner = tlsOver(t, lc, b)
			}
			c, err := idleconn.WrapConn(inner, w, only(idle.Config{IdleTimeout: time.Second}))
			require.NoError(t, err)
			defer c.Close()
			if tc.viaConn {
				require.NoError(t, c.SetLinger(2))
			} else {
				require.NoError(t, lc.SetLinger(2))
			}

			clk.Advance(time.Second)
			require.Equal(t, idle.ReasonIdle, c.Tracker().Reason())
			select {
			case linger := <-lc.closedWith:
				assert.Equal(t, int64(-1), linger,
					"the timeout's Close ran with a linger of %d s: a TCP conn's Close would wait that long on the wheel's goroutine", linger)
			default:
				t.Fatal("the timeout did not close the transport")
			}
		})
	}
}

// tlsOver runs a TLS handshake over the pipe ends server and client and
// returns the server's *tls.Conn; the client end is then left unread.
func tlsOver(t *testing.T, server, client net.Conn) *tls.Conn {
	t.Helper()
	cert, roots, err := selfSigned()
	require.NoError(t, err)
	s := tls.Server(server, &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true})
	cl := tls.Client(client, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	handshook := make(chan error, 1)
	go func() { handshook <- cl.Handshake() }()
	require.NoError(t, s.Handshake())
	require.NoError(t, waitErr(t, handshook))
	return s
}

// TestConn_WriteStallLingerDoesNotBlockWheel is the real case: over TCP,
// with a 3 s linger, a peer that reads nothing and unsent data queued, the
// write-stall close inside Advance returns at once, where the conn's Close
// alone would wait out the linger (3 s). A wall-clock check, with margins:
// it fails at 1.5 s plus what the machine took from this process.
func TestConn_WriteStallLingerDoesNotBlockWheel(t *testing.T) {
	clk, _, sc, client := pair(t, only(idle.Config{WriteStallTimeout: 5 * time.Second}))
	require.NoError(t, sc.SetLinger(3))
	fillUntilStalled(t, sc.NetConn(), client)
	sc.Tracker().Written() // as a Write blocked on the full buffers would have

	lag := lagmeter.New(t)
	start := time.Now()
	clk.Advance(5 * time.Second)
	elapsed := time.Since(start)
	require.Equal(t, idle.ReasonWriteStall, sc.Tracker().Reason())
	assert.Less(t, elapsed, lag.Slack(1500*time.Millisecond), "the close waited out the linger on the wheel's goroutine")
}

// fillUntilStalled writes to nc, whose peer client never reads, until a
// write cannot proceed: both socket buffers are full, and unsent data is
// queued on nc.
func fillUntilStalled(t *testing.T, nc, client net.Conn) {
	t.Helper()
	require.NoError(t, client.(*net.TCPConn).SetReadBuffer(4<<10))
	require.NoError(t, nc.(*net.TCPConn).SetWriteBuffer(4<<10))
	buf := make([]byte, 64<<10)
	for {
		require.NoError(t, nc.SetWriteDeadline(time.Now().Add(100*time.Millisecond)))
		_, err := nc.Write(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		require.NoError(t, err)
	}
	require.NoError(t, nc.SetWriteDeadline(time.Time{}))
}
