package netserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

func TestNew_RejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  netserver.Config
		want string
	}{
		{name: "no address", cfg: netserver.Config{}, want: "Addr is empty"},
		{name: "bad address", cfg: netserver.Config{Addr: "nowhere"}, want: "Addr \"nowhere\""},
		{name: "keepalive on raw", cfg: netserver.Config{Addr: ":0", Timeouts: idle.Config{KeepaliveTime: time.Second, KeepaliveTimeout: time.Second}}, want: "implements Prober"},
		{name: "bad idle", cfg: netserver.Config{Addr: ":0", Timeouts: idle.Config{KeepaliveCount: -1}}, want: "Timeouts"},
		{name: "port out of range", cfg: netserver.Config{Addr: "127.0.0.1:99999"}, want: "invalid port"},
		{name: "bad retransmit", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed, Retransmit: retransmit.Config{MinRTO: 2 * time.Second, MaxRTO: time.Second}}, want: "Retransmit"},
		{name: "tick", cfg: netserver.Config{Addr: ":0", Tick: time.Nanosecond}, want: "Tick"},
		{name: "max frame", cfg: netserver.Config{Addr: ":0", MaxFrame: 3}, want: "MaxFrame"},
		{name: "kernel", cfg: netserver.Config{Addr: ":0", Kernel: netserver.KernelConfig{KeepaliveCount: 3}}, want: "KeepaliveIdle"},
		{name: "soft above hard", cfg: netserver.Config{Addr: ":0", Limits: netserver.Limits{OutputHard: 1000, OutputSoft: 2000}}, want: "OutputSoft"},
		{name: "unacked bytes on raw", cfg: netserver.Config{Addr: ":0", Limits: netserver.Limits{UnackedBytes: 1000}}, want: "UnackedBytes needs the framed"},
		{name: "max frame above unacked bytes", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed, MaxFrame: 2 << 20}, want: "Limits.UnackedBytes"},
		{name: "max frame above output hard", cfg: netserver.Config{Addr: ":0", Protocol: netserver.Framed, MaxFrame: 2 << 20,
			Limits: netserver.Limits{UnackedBytes: 4 << 20, OutputHard: 1 << 20, OutputSoft: 1 << 19}}, want: "Limits.OutputHard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := netserver.New(tc.cfg, netserver.Echo{})
			require.ErrorIs(t, err, netserver.ErrConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := netserver.New(netserver.Config{Addr: ":0"}, nil)
	assert.ErrorIs(t, err, netserver.ErrConfig)
}

func TestRaw_EchoAndIdleReap(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := start(t, netserver.Config{Timeouts: idle.Config{IdleTimeout: timeout}}, nil)
	lag := lagmeter.New(t)
	c := dial(t, s)
	c.Push([]byte("hello"))
	got := make([]byte, 5)
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	last := time.Now() // after our last byte arrived back: the server saw it before
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Read(got)
	closed := time.Now()
	require.ErrorIs(t, err, io.EOF)
	// The server closes between timeout and timeout + 2 ticks + slack, measured
	// from the client (which saw its echo after the server's last activity);
	// the slack grows with the time this process was kept off the CPU.
	assert.GreaterOrEqual(t, closed.Sub(c.Dialed), timeout, "closed before the idle timeout")
	late := lag.Slack(2*time.Millisecond + 100*time.Millisecond)
	assert.Less(t, closed.Sub(last), timeout+late, "closed too late")
	require.Eventually(t, func() bool { return s.Stats().Closed["idle"] == 1 }, waitFor, time.Millisecond)
	// The server measured the close against its deadline: one sample, not
	// negative, and within the bound the client saw.
	m := scrape(t, s)
	assert.Equal(t, 1.0, m["netwheel_timeout_close_delay_seconds_count"])
	assert.GreaterOrEqual(t, m["netwheel_timeout_close_delay_seconds_sum"], 0.0)
	assert.Less(t, m["netwheel_timeout_close_delay_seconds_sum"], late.Seconds())
	// The wheel woke at least to fire the idle timer.
	assert.Positive(t, m["netwheel_wheel_wakeups_total"])
}

// scrape reads the server's metrics endpoint and returns its unlabelled
// samples by name.
func scrape(t *testing.T, s *netserver.Server) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	out := map[string]float64{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		require.NoError(t, err, line)
		out[name] = v
	}
	return out
}

func framedCfg() netserver.Config {
	return netserver.Config{Protocol: netserver.Framed}
}

func TestFramed_EchoAcksAndCumulativeAckStopsRetransmission(t *testing.T) {
	cfg := framedCfg()
	cfg.Retransmit = retransmit.Config{InitialRTO: 50 * time.Millisecond, MinRTO: 20 * time.Millisecond}
	s := start(t, cfg, nil)
	c := dial(t, s)
	var out []byte
	for seq := uint64(1); seq <= 3; seq++ {
		out = frame.AppendData(out, seq, []byte{byte('a' + seq)})
	}
	c.Push(out)
	var echoes []frame.Frame
	acked := uint64(0)
	for len(echoes) < 3 || acked < 3 {
		f, err := c.Next(waitFor)
		require.NoError(t, err)
		switch f.Type {
		case frame.TypeAck:
			acked = f.Seq
		case frame.TypeData:
			echoes = append(echoes, f)
		}
	}
	for i, f := range echoes {
		assert.Equal(t, uint64(i+1), f.Seq, "the server numbers its DATA 1, 2, 3")
		assert.Equal(t, []byte{byte('a' + i + 1)}, f.Payload)
	}
	// One cumulative ACK for all three: nothing may be retransmitted.
	c.Push(frame.AppendAck(nil, 3))
	f, err := c.Next(300 * time.Millisecond)
	require.Error(t, err, "got %v %d after the cumulative ack", f.Type, f.Seq)
	assert.Zero(t, s.Stats().Retransmits)
}

func TestFramed_RetransmitLadderAndGiveUp(t *testing.T) {
	cfg := framedCfg()
	cfg.Retransmit = retransmit.Config{InitialRTO: 100 * time.Millisecond, MinRTO: 50 * time.Millisecond, MaxRetransmits: 3}
	s := start(t, cfg, nil)
	lag := lagmeter.New(t)
	c := dial(t, s)
	wrote := time.Now() // the server cannot have echoed, nor started its timer, before this
	c.Push(frame.AppendData(nil, 1, []byte("x")))
	var sent []time.Time
	var code frame.Code
	for {
		f, err := c.Next(5 * time.Second)
		if testpeer.Closed(err) {
			break
		}
		require.NoError(t, err)
		switch f.Type {
		case frame.TypeData:
			assert.Equal(t, uint64(1), f.Seq, "only the unacknowledged message is resent")
			sent = append(sent, time.Now())
		case frame.TypeClose:
			code = f.Code
		}
	}
	require.Len(t, sent, 4, "the echo and three retransmissions")
	// RFC 6298 backoff: resends 100ms, 300ms and 700ms after the echo. The
	// echo left the server after our write, so each resend arrives no
	// earlier than that much after the write (a lower bound that a slow
	// client read cannot shrink); and, measured from the echo's arrival, no
	// later than the ladder plus scheduling slack, which grows with the time
	// this process was kept off the CPU.
	for i, want := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond} {
		assert.GreaterOrEqual(t, sent[i+1].Sub(wrote), want, "retransmission %d", i+1)
		assert.Less(t, sent[i+1].Sub(sent[0]), want+lag.Slack(150*time.Millisecond), "retransmission %d", i+1)
	}
	assert.Equal(t, frame.CodeGiveUp, code)
	require.Eventually(t, func() bool { return s.Stats().GiveUps == 1 }, waitFor, time.Millisecond)
	assert.Equal(t, int64(3), s.Stats().Retransmits)
}

func TestFramed_KeepaliveSurviveAndDeath(t *testing.T) {
	cfg := framedCfg()
	cfg.Timeouts = idle.Config{KeepaliveTime: 150 * time.Millisecond, KeepaliveTimeout: 150 * time.Millisecond}
	s := start(t, cfg, nil)

	// A peer that answers pings stays open well past Time+Timeout.
	alive := dial(t, s)
	done := make(chan int)
	go func() {
		pings := 0
		for {
			f, err := alive.Next(time.Second)
			if err != nil {
				done <- pings
				return
			}
			if f.Type == frame.TypePing {
				pings++
				_, _ = alive.Write(frame.AppendPong(nil, f.Nonce))
				if pings == 4 {
					done <- pings
					return
				}
			}
		}
	}()
	assert.Equal(t, 4, <-done, "answered four pings and is still open")

	// A silent peer is closed after Time + Timeout.
	lag := lagmeter.New(t)
	dead := dial(t, s)
	code, at := dead.WaitClose(5 * time.Second)
	assert.Equal(t, frame.CodeDeadPeer, code)
	assert.GreaterOrEqual(t, at.Sub(dead.Dialed), 300*time.Millisecond)
	assert.Less(t, at.Sub(dead.Dialed), 300*time.Millisecond+lag.Slack(200*time.Millisecond))
	assert.GreaterOrEqual(t, s.Stats().Probes, int64(5))
}

// TestFramed_OversizedAndProtocolErrors: each violation closes its connection
// with its own code, and the server serves the others. (Slowloris is
// TestFramed_Slowloris, in segment_test.go.)
func TestFramed_OversizedAndProtocolErrors(t *testing.T) {
	cfg := framedCfg()
	cfg.MaxFrame = 1024
	s := start(t, cfg, nil)

	for _, tc := range []struct {
		name string
		send []byte
		want frame.Code
	}{
		{name: "oversized", send: []byte{0, 1, 0, 0, 1}, want: frame.CodeTooLarge},
		{name: "unknown type", send: []byte{0, 0, 0, 1, 77}, want: frame.CodeProtocol},
		{name: "sequence gap", send: frame.AppendData(nil, 5, []byte("x")), want: frame.CodeProtocol},
		{name: "ack of unsent", send: frame.AppendAck(nil, 9), want: frame.CodeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			c.Push(tc.send)
			code, _ := c.WaitClose(5 * time.Second)
			assert.Equal(t, tc.want, code)
		})
	}
	// And the server still serves everyone else.
	ok := dial(t, s)
	ok.Push(frame.AppendPing(nil, 7))
	f, err := ok.Next(waitFor)
	require.NoError(t, err)
	assert.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: 7}, f)
	st := s.Stats()
	assert.Equal(t, int64(1), st.Closed["frame_too_large"])
	assert.Equal(t, int64(3), st.Closed["protocol_error"])
}

func TestMaxConns(t *testing.T) {
	cfg := framedCfg()
	cfg.MaxConns = 2
	s := start(t, cfg, nil)
	a, b := dial(t, s), dial(t, s)
	for _, c := range []*testpeer.Peer{a, b} { // make sure both are open
		c.Push(frame.AppendPing(nil, 1))
		_, err := c.Next(waitFor)
		require.NoError(t, err)
	}
	extra := dial(t, s)
	code, _ := extra.WaitClose(waitFor)
	assert.Equal(t, frame.CodeOverload, code)
	a.Push(frame.AppendPing(nil, 2))
	_, err := a.Next(waitFor)
	assert.NoError(t, err, "the connections within the limit keep working")
	assert.Equal(t, int64(2), s.Stats().Open)
}

type panicky struct{ netserver.Echo }

func (panicky) OnMessage(c *netserver.Conn, msg []byte) {
	if string(msg) == "boom" {
		panic("handler bug")
	}
	netserver.Echo{}.OnMessage(c, msg)
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	s := start(t, framedCfg(), panicky{})
	bad, good := dial(t, s), dial(t, s)
	bad.Push(frame.AppendData(nil, 1, []byte("boom")))
	code, _ := bad.WaitClose(waitFor)
	assert.Equal(t, frame.CodeInternal, code)
	good.Push(frame.AppendData(nil, 1, []byte("fine")))
	for {
		f, err := good.Next(waitFor)
		require.NoError(t, err)
		if f.Type == frame.TypeData {
			assert.Equal(t, "fine", string(f.Payload))
			break
		}
	}
	assert.Equal(t, int64(1), s.Stats().Closed["handler_panic"])
}

func TestShutdown_ClosesIdleWaitsForBusy(t *testing.T) {
	cfg := framedCfg()
	cfg.Retransmit = retransmit.Config{InitialRTO: time.Second}
	s, err := netserver.New(withAddr(cfg), netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	idleC := dial(t, s)
	busy := dial(t, s)
	busy.Push(frame.AppendData(nil, 1, []byte("unacked"))) // the echo stays unacknowledged
	for {
		f, err := busy.Next(waitFor)
		require.NoError(t, err)
		if f.Type == frame.TypeData {
			break
		}
	}
	idleC.Push(frame.AppendPing(nil, 1))
	_, err = idleC.Next(waitFor)
	require.NoError(t, err)

	var shutdownErr atomic.Value
	done := make(chan struct{})
	go func() {
		// Long: the drain must end by the busy connection's ACK, not by
		// a deadline a busy machine could reach first.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			shutdownErr.Store(err)
		}
		close(done)
	}()
	// The idle connection gets GOAWAY and a PING; its Conn answers both,
	// and it is closed once its answer arrives.
	idleC.Frames.SetReplies(frame.ReplyAll)
	code, _ := idleC.WaitClose(waitFor)
	assert.Equal(t, frame.CodeShutdown, code, "the idle connection is told and closed at once")
	away, ok := idleC.Frames.GoingAway()
	require.True(t, ok, "GOAWAY came before the CLOSE")
	assert.Equal(t, frame.CodeShutdown, away.Code)
	// The busy one answers GOAWAY but has not acknowledged its echo.
	f, err := busy.Next(waitFor)
	for err == nil && f.Type == frame.TypeAck { // of its DATA 1
		f, err = busy.Next(waitFor)
	}
	require.NoError(t, err)
	require.Equal(t, frame.TypeGoAway, f.Type)
	assert.Equal(t, uint64(1), f.Seq, "the server's last DATA")
	busy.Push(frame.AppendGoAway(nil, frame.CodeShutdown, 1, 0, ""))
	select {
	case <-done:
		t.Fatal("Shutdown returned while a connection still had unacknowledged data")
	case <-time.After(100 * time.Millisecond):
	}
	busy.Push(frame.AppendAck(nil, 1)) // done with it: now it has finished
	code, _ = busy.WaitClose(waitFor)
	assert.Equal(t, frame.CodeShutdown, code)
	<-done
	assert.Nil(t, shutdownErr.Load())
	late, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
	if err == nil { // the port may be reused already; if it connects, nobody serves it
		late.Close()
	}
	assert.Zero(t, s.Stats().Open)
	assert.Zero(t, s.Stats().TimersPending)
}

func withAddr(cfg netserver.Config) netserver.Config {
	cfg.Addr = "127.0.0.1:0"
	cfg.EventLoops = 2
	return cfg
}
