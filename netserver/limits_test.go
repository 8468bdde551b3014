package netserver_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// dialSmallReceive connects with a receive buffer of rcvbuf bytes, set
// before the connect so the window the server sees is small from the start.
func dialSmallReceive(t *testing.T, s *netserver.Server, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWith waits (polling the server's counters, at most timeout) until
// the server has closed a connection with reason, and reports when it saw it.
func closedWith(t *testing.T, s *netserver.Server, reason string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if s.Stats().Closed[reason] > 0 {
			return time.Now()
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no connection closed with %s within %v; closes: %v", reason, timeout, s.Stats().Closed)
	return time.Time{}
}

// A peer that sends and never reads is closed once its queued output passes
// the hard limit, raw or framed; the server keeps serving the others.
func TestOutput_HardLimitClosesNonReader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto netserver.Protocol
	}{
		{name: "raw", proto: netserver.Raw},
		{name: "framed", proto: netserver.Framed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const hard = 256 << 10 // far below DefaultOutputHard, so the close's log tells which limit acted
			logger, logs := newLogCapture()
			cfg := netserver.Config{Protocol: tc.proto, Logger: logger, Limits: netserver.Limits{OutputHard: hard, OutputSoft: -1}}
			if tc.proto == netserver.Framed {
				// Or the unacknowledged echoes would close it first.
				cfg.Limits.UnackedBytes = -1
			}
			s := start(t, cfg, nil)
			c := dialSmallReceive(t, s, 4096)
			chunk := make([]byte, 16<<10)
			const most = 64 << 20 // the server's socket buffers take a few MiB; the limit must act long before this
			var sent int
			var werr error
			for seq := uint64(1); sent < most; seq++ {
				msg := chunk
				if tc.proto == netserver.Framed {
					msg = frame.AppendData(nil, seq, chunk)
				}
				require.NoError(t, c.SetWriteDeadline(time.Now().Add(5*time.Second)))
				var n int
				n, werr = c.Write(msg)
				sent += n
				if werr != nil {
					break
				}
			}
			require.Error(t, werr, "the server never closed a peer that sent %d MiB and read nothing", sent>>20)
			assert.False(t, errors.Is(werr, context.DeadlineExceeded) || isTimeout(werr), "the server stopped reading instead of closing: %v", werr)
			closedWith(t, s, "output_limit", 5*time.Second)
			assert.Equal(t, map[string]int64{"output_limit": 1}, s.Stats().Closed)
			// The limit in force, and the queue it stopped: the bytes that
			// would have been queued pass it by at most one echo, that of
			// one read (gnet reads at most MaxStreamBufferCap bytes at a
			// time; Raw echoes a read at once, Framed frame by frame).
			closes := logs.attrsOf("netserver: output limit: closing a connection that does not read")
			require.Len(t, closes, 1, "one output-limit close logged")
			assert.Equal(t, int64(hard), intAttr(t, closes[0], "hard_limit"), "the hard limit in force")
			queued := intAttr(t, closes[0], "queued_bytes")
			assert.Greater(t, queued, int64(hard), "closed before the queued output passed the hard limit")
			assert.LessOrEqual(t, queued, int64(hard+gnet.MaxStreamBufferCap), "closed only well past the hard limit")

			other := dial(t, s)
			if tc.proto == netserver.Framed {
				other.Push(frame.AppendPing(nil, 9))
				f, err := other.Next(waitFor)
				require.NoError(t, err)
				assert.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: 9}, f)
			} else {
				other.Push([]byte("still here"))
				require.NoError(t, other.SetReadDeadline(time.Now().Add(2*time.Second)))
				buf := make([]byte, 10)
				_, err := other.Read(buf)
				require.NoError(t, err)
				assert.Equal(t, "still here", string(buf))
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Output above the soft limit is allowed for OutputSoftFor, then the
// connection closes, though the hard limit was never reached.
func TestOutput_SoftLimitHeldTooLong(t *testing.T) {
	const (
		soft    = 64 << 10
		softFor = 300 * time.Millisecond
		// The output is looked at every softFor/4 (a wheel timer,
		// re-armed from each look), so the close comes at most that
		// long after softFor; the rest is slack for a loaded machine:
		// the 8 MiB write, the loop's and the wheel's scheduling, and
		// closedWith's polling.
		look  = softFor / 4
		slack = 400 * time.Millisecond
	)
	logger, logs := newLogCapture()
	cfg := netserver.Config{Logger: logger, Limits: netserver.Limits{OutputHard: 64 << 20, OutputSoft: soft, OutputSoftFor: softFor}}
	s := start(t, cfg, nil)
	c := dialSmallReceive(t, s, 4096)
	lag := lagmeter.New(t)
	began := time.Now()
	// About 4 MiB fit in the socket buffers (the server's send buffer
	// grows to net.ipv4.tcp_wmem's maximum); the rest queues in the server.
	_, err := c.Write(make([]byte, 8<<20))
	require.NoError(t, err)
	at := closedWith(t, s, "output_limit", waitFor)
	assert.GreaterOrEqual(t, at.Sub(began), softFor, "closed before the soft limit's time was up")
	assert.Less(t, at.Sub(began), softFor+look+lag.Slack(slack), "closed long after the soft limit's time was up")
	assert.Equal(t, map[string]int64{"output_limit": 1}, s.Stats().Closed)
	closes := logs.attrsOf("netserver: soft output limit held too long: closing a connection that reads too slowly")
	require.Len(t, closes, 1, "one soft-limit close logged")
	assert.Equal(t, int64(soft), intAttr(t, closes[0], "soft_limit"), "the soft limit in force")
	assert.Equal(t, softFor.String(), closes[0]["soft_for"].String(), "the soft limit's time in force")
}

// The write-stall timeout measures time without progress: a peer that keeps
// reading, however slowly, is never cut; one that stops is cut the timeout
// after its last read (never before) and not much later.
func TestWriteStall_MeansNoProgress(t *testing.T) {
	// A reader kept off the CPU for the stall timeout is rightly cut: such
	// an attempt checks nothing and is run again, a few times at most.
	for attempt := 1; !writeStallAttempt(t); attempt++ {
		require.Less(t, attempt, 4, "the test was kept off the CPU for the stall timeout in every attempt")
	}
}

// writeStallAttempt is one attempt of TestWriteStall_MeansNoProgress. It
// returns false, having checked nothing more, when the steady reader was
// cut and the test had been kept off the CPU long enough (lagmeter's
// Worst) for a read to come after the stall timeout.
func writeStallAttempt(t *testing.T) bool {
	t.Helper()
	const (
		stall = time.Second
		pace  = 60 * time.Millisecond
	)
	cfg := netserver.Config{
		Timeouts: idle.Config{WriteStallTimeout: stall},
		Limits:   netserver.Limits{OutputHard: -1, OutputSoft: -1},
	}
	s := start(t, cfg, nil)
	c := dialSmallReceive(t, s, 16<<10)
	want := make([]byte, 12<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	lag := lagmeter.New(t)
	_, err := c.Write(want)
	require.NoError(t, err)

	// Read a little every 60 ms for three times the stall timeout: the
	// output stays queued all along but drains.
	got := make([]byte, 0, len(want))
	buf := make([]byte, 16<<10)
	var lastRead time.Time
	for end := time.Now().Add(3 * stall); time.Now().Before(end); {
		time.Sleep(pace) // the peer's pace, not a wait for a timer
		require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
		n, err := c.Read(buf)
		// The server's loop and this reader run on threads of their own:
		// the sampler may see their stalls only in its total.
		if err != nil && (lag.Worst() >= stall/2 || lag.Stalled() >= stall) {
			t.Logf("the reader was cut (%v) after a stall of %v: again", err, lag.Worst())
			return false
		}
		require.NoError(t, err, "a peer that keeps reading was cut; closes: %v", s.Stats().Closed)
		got = append(got, buf[:n]...)
		lastRead = time.Now()
	}
	require.Less(t, len(got), len(want)-(4<<20), "the output must still be queued for the test to mean anything")
	assert.True(t, bytes.Equal(want[:len(got)], got), "echo intact")
	assert.Empty(t, s.Stats().Closed, "a slow but steady reader was cut")

	// Now it stops reading.
	at := closedWith(t, s, "write_stall", waitFor)
	assert.GreaterOrEqual(t, at.Sub(lastRead), stall, "cut before the stall timeout had passed since the last read")
	assert.Less(t, at.Sub(lastRead), stall+stall/4+lag.Slack(300*time.Millisecond), "cut long after the stall timeout")
	return true
}

// A framed peer that leaves the server's DATA unacknowledged is closed once
// the unacknowledged bytes pass the limit, after exactly the echoes that fit.
func TestUnacked_BytesLimit(t *testing.T) {
	cfg := framedCfg()
	cfg.Limits.UnackedBytes = 40_000
	cfg.MaxFrame = 32 << 10 // a largest message must fit the limit
	s := start(t, cfg, nil)
	c := dial(t, s)
	payload := bytes.Repeat([]byte("u"), 10_000)
	for seq := uint64(1); seq <= 5; seq++ {
		c.Push(frame.AppendData(nil, seq, payload))
	}
	echoes := 0
	var code frame.Code
	for {
		f, err := c.Next(waitFor)
		if err != nil {
			break
		}
		switch f.Type {
		case frame.TypeData:
			echoes++
			assert.Equal(t, payload, f.Payload)
		case frame.TypeClose:
			code = f.Code
		}
	}
	assert.Equal(t, 4, echoes, "40 000 bytes fit")
	assert.Equal(t, frame.CodeUnackedLimit, code)
	assert.Equal(t, int64(1), s.Stats().Closed["unacked_limit"])
}

// A large frame arriving in many small reads is looked at once its length
// is known and once it is whole, not on every read, and arrives intact.
func TestFramed_SlowFrameNotRepeeked(t *testing.T) {
	cfg := framedCfg()
	cfg.MaxFrame = 256 << 10
	s := start(t, cfg, nil)
	c := dialMax(t, s, cfg.MaxFrame)
	payload := make([]byte, 200<<10)
	for i := range payload {
		payload[i] = byte(i)
	}
	wire := frame.AppendData(nil, 1, payload)
	before := s.Peeks()
	const piece = 2 << 10
	for off := 0; off < len(wire); off += piece {
		c.Push(wire[off:min(off+piece, len(wire))])
		time.Sleep(time.Millisecond) // the peer's pace: each piece a read of its own
	}
	for {
		f, err := c.Next(waitFor)
		require.NoError(t, err)
		if f.Type == frame.TypeData {
			assert.True(t, bytes.Equal(payload, f.Payload), "echo intact")
			break
		}
	}
	assert.LessOrEqual(t, s.Peeks()-before, int64(3), "%d pieces", (len(wire)+piece-1)/piece)
}

// The frame deadline runs from a frame's first byte, even when that byte is
// part of the length that follows a complete frame.
func TestFramed_FrameDeadlineFromFirstHeaderByte(t *testing.T) {
	const frameTimeout = 300 * time.Millisecond
	cfg := framedCfg()
	cfg.Timeouts = idle.Config{FrameTimeout: frameTimeout}
	s := start(t, cfg, nil)
	c := dial(t, s)
	c.Push(frame.AppendPing(nil, 1))
	f, err := c.Next(waitFor)
	require.NoError(t, err)
	require.Equal(t, frame.TypePong, f.Type)

	header := frame.AppendData(nil, 1, make([]byte, 100))[:frame.DataHeaderSize]
	lag := lagmeter.New(t)
	first := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := range header {
			if i > 0 {
				select {
				case <-stop:
					return
				case <-time.After(120 * time.Millisecond): // the peer's pace
				}
			}
			if _, err := c.Write(header[i : i+1]); err != nil {
				return
			}
		}
	}()
	code, at := c.WaitClose(5 * time.Second)
	assert.Equal(t, frame.CodeFrameDeadline, code)
	assert.GreaterOrEqual(t, at.Sub(first), frameTimeout)
	// Counted from the fourth byte (the whole length), the close would come
	// 360 ms later (on a quiet machine; the slack grows with the time this
	// process was kept off the CPU).
	assert.Less(t, at.Sub(first), frameTimeout+lag.Slack(250*time.Millisecond))
}

// PINGs are answered up to Limits.PingsPerSecond at once and that many a
// second after; one more closes the connection with ping_flood, and a peer
// within the rate is never cut.
func TestFramed_PingFlood(t *testing.T) {
	cfg := framedCfg()
	cfg.Limits.PingsPerSecond = 100
	s := start(t, cfg, nil)

	flood := dial(t, s)
	var burst []byte
	for i := range 150 {
		burst = frame.AppendPing(burst, uint64(i))
	}
	flood.Push(burst)
	pongs := 0
	code, _ := func() (frame.Code, error) {
		for {
			f, err := flood.Next(waitFor)
			if err != nil {
				return 0, err
			}
			switch f.Type {
			case frame.TypePong:
				pongs++
			case frame.TypeClose:
				return f.Code, nil
			}
		}
	}()
	assert.Equal(t, frame.CodePingFlood, code)
	assert.Equal(t, 100, pongs, "a second's worth answered")
	// The CLOSE frame goes out before the server's OnClose counts it.
	require.Eventually(t, func() bool { return s.Stats().Closed["ping_flood"] == 1 }, waitFor, time.Millisecond)

	steady := dial(t, s)
	for i := range 60 { // 50 a second for 1.2 s: within the rate
		steady.Push(frame.AppendPing(nil, uint64(i)))
		f, err := steady.Next(waitFor)
		require.NoError(t, err, "ping %d", i)
		require.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: uint64(i)}, f)
		time.Sleep(20 * time.Millisecond) // the peer's pace
	}
	assert.Equal(t, int64(1), s.Stats().Closed["ping_flood"], "the steady peer was not cut")
}
