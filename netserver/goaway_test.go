package netserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// oneWay is the delay of each direction of the link in these tests: a
// round trip of at least 100 ms.
const oneWay = 50 * time.Millisecond

// overLink returns the address of a delaying proxy (oneWay each way) in
// front of s, closed at the end of the test, before s shuts down.
func overLink(t *testing.T, s *netserver.Server) string {
	t.Helper()
	p, err := testnet.Listen(testnet.Config{Target: s.Addr().String(), Delay: oneWay})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p.Addr().String()
}

// peer is a frame.Conn client over the link that sends a numbered DATA
// every period (or only when told) until the server says GOAWAY, and
// records what comes back until the final CLOSE.
type peer struct {
	fc     *frame.Conn
	dialed time.Time // before the dial: a lower bound for the server's open

	mu     sync.Mutex
	sent   int           // DATA sent (payloads "0", "1", ...)
	echoes int           // echoes received, each checked in order
	bad    error         // the first echo out of order, or an unexpected error
	code   frame.Code    // of the final CLOSE
	closed time.Time     // when the final CLOSE arrived
	done   chan struct{} // closed when the reader has ended
}

// dialPeer connects a peer to addr with the given replies.
func dialPeer(t *testing.T, addr string, replies frame.Reply) *peer {
	t.Helper()
	p := &peer{dialed: time.Now(), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fc, err := frame.Dial(ctx, addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fc.NetConn().Close() })
	require.NoError(t, fc.NetConn().SetDeadline(time.Now().Add(30*time.Second)))
	fc.SetReplies(replies)
	p.fc = fc
	go p.read()
	return p
}

// send sends the next DATA; it reports false once the Conn refuses (GOAWAY)
// or fails.
func (p *peer) send() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed.IsZero() || p.bad != nil {
		return false
	}
	if _, err := p.fc.Send(fmt.Appendf(nil, "%d", p.sent)); err != nil {
		if !errors.Is(err, frame.ErrGoingAway) && p.bad == nil {
			p.bad = fmt.Errorf("send %d: %w", p.sent, err)
		}
		return false
	}
	p.sent++
	return true
}

// every sends a DATA every period until the peer stops sending.
func (p *peer) every(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for p.send() {
		select {
		case <-t.C:
		case <-p.done:
			return
		}
	}
}

// read takes the echoes, in order, until the final CLOSE.
func (p *peer) read() {
	defer close(p.done)
	for {
		b, err := p.fc.Recv()
		p.mu.Lock()
		var ce *frame.CloseError
		switch {
		case errors.As(err, &ce):
			p.code, p.closed = ce.Code, time.Now()
		case err != nil:
			if p.bad == nil {
				p.bad = fmt.Errorf("before the final CLOSE: %w", err)
			}
		case string(b) != fmt.Sprint(p.echoes):
			if p.bad == nil {
				p.bad = fmt.Errorf("echo %q, want %d", b, p.echoes)
			}
		default:
			p.echoes++
		}
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// wait waits for the reader to end.
func (p *peer) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatal("the peer's connection did not end")
	}
}

// TestShutdown_DrainOverLongLink is issue 26's third case: over a link
// with a 100 ms round trip, peers that keep sending (a DATA every 50 ms,
// about two in flight at any time) are told GOAWAY when the drain starts,
// stop starting new DATA, and get every DATA in flight echoed and
// acknowledged before the final CLOSE code 2. Shutdown finishes well
// within its 5 s grace with nothing cut, and never before a round trip,
// the least the peers' answers take.
func TestShutdown_DrainOverLongLink(t *testing.T) {
	const conns = 30
	s := start(t, framedCfg(), nil)
	addr := overLink(t, s)
	peers := make([]*peer, conns)
	for i := range peers {
		peers[i] = dialPeer(t, addr, frame.ReplyAll)
		go peers[i].every(50 * time.Millisecond)
	}
	require.Eventually(t, func() bool { // every peer busy: echoes coming back
		for _, p := range peers {
			p.mu.Lock()
			n := p.echoes
			p.mu.Unlock()
			if n < 5 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	require.NoError(t, s.Shutdown(ctx), "drained within the grace, nothing cut")
	took := time.Since(began)
	assert.GreaterOrEqual(t, took, 2*oneWay, "closed before a peer's answer could arrive")
	t.Logf("drained %d peers over a %v round trip in %v", conns, 2*oneWay, took)

	inFlight := 0
	for i, p := range peers {
		p.wait(t, 5*time.Second)
		p.mu.Lock()
		assert.NoError(t, p.bad, "peer %d", i)
		assert.Equal(t, frame.CodeShutdown, p.code, "peer %d: final CLOSE", i)
		assert.Equal(t, p.sent, p.echoes, "peer %d: every DATA sent is echoed", i)
		assert.EqualValues(t, p.sent, p.fc.Acked(), "peer %d: every DATA sent is acknowledged", i)
		away, ok := p.fc.GoingAway()
		if assert.True(t, ok, "peer %d: told GOAWAY", i) {
			assert.Equal(t, frame.CodeShutdown, away.Code)
			assert.LessOrEqual(t, away.Grace, 5*time.Second)
			if away.At.Before(p.closed) {
				inFlight++
			}
		}
		p.mu.Unlock()
	}
	assert.Equal(t, conns, inFlight, "GOAWAY came before the final CLOSE")
	st := s.Stats()
	assert.Zero(t, st.Cut)
	assert.Equal(t, map[string]int64{"shutdown": conns}, st.Closed)
}

// TestMaxAge_GraceOverLongLink is issue 26's second case: connections
// reaching their max age over a 100 ms round trip, with a keepalive (2 s,
// answered within 1 s) and a give-up after 3 retransmissions, and a grace
// longer than those, all end as max_age, none closed by keepalive,
// retransmission give-up or anything else in the grace. Peers that keep
// sending (a DATA every 50 ms) answer the GOAWAY, finish what was in
// flight and are closed as soon as that is done; peers that ignore the
// GOAWAY, send a DATA every 3 s (so the server probes their silence in
// between) and answer everything else, are kept to the end of the grace,
// never closed before it.
func TestMaxAge_GraceOverLongLink(t *testing.T) {
	const (
		conns  = 10 // of each kind
		maxAge = 500 * time.Millisecond
		grace  = 4 * time.Second
	)
	cfg := framedCfg()
	cfg.Timeouts = idle.Config{
		MaxAge:           maxAge,
		MaxAgeGrace:      grace,
		KeepaliveTime:    2 * time.Second,
		KeepaliveTimeout: time.Second,
	}
	cfg.Retransmit = retransmit.Config{MaxRetransmits: 3}
	s := start(t, cfg, nil)
	addr := overLink(t, s)
	busy := make([]*peer, conns)
	quiet := make([]*peer, conns)
	for i := range conns {
		busy[i] = dialPeer(t, addr, frame.ReplyAll)
		go busy[i].every(50 * time.Millisecond)
		quiet[i] = dialPeer(t, addr, frame.ReplyAck|frame.ReplyPong)
		go quiet[i].every(3 * time.Second)
	}
	for _, p := range append(busy, quiet...) {
		p.wait(t, maxAge+grace+5*time.Second)
	}
	for i, p := range busy {
		p.mu.Lock()
		assert.NoError(t, p.bad, "busy peer %d", i)
		assert.Equal(t, frame.CodeMaxAge, p.code, "busy peer %d: final CLOSE", i)
		assert.Positive(t, p.sent)
		assert.Equal(t, p.sent, p.echoes, "busy peer %d: every DATA sent is echoed", i)
		assert.EqualValues(t, p.sent, p.fc.Acked(), "busy peer %d: every DATA sent is acknowledged", i)
		assert.False(t, p.closed.Before(p.dialed.Add(maxAge)), "busy peer %d: closed before its max age", i)
		assert.True(t, p.closed.Before(p.dialed.Add(maxAge+grace)), "busy peer %d: kept to the end of the grace, though finished", i)
		away, ok := p.fc.GoingAway()
		if assert.True(t, ok, "busy peer %d: told GOAWAY", i) {
			assert.Equal(t, frame.CodeMaxAge, away.Code)
			assert.Equal(t, grace, away.Grace)
		}
		p.mu.Unlock()
	}
	for i, p := range quiet {
		p.mu.Lock()
		assert.NoError(t, p.bad, "quiet peer %d", i)
		assert.Equal(t, frame.CodeMaxAge, p.code, "quiet peer %d: final CLOSE", i)
		assert.GreaterOrEqual(t, p.sent, 2, "quiet peer %d sent in the grace too", i)
		assert.Equal(t, p.sent, p.echoes, "quiet peer %d: every DATA sent is echoed", i)
		assert.False(t, p.closed.Before(p.dialed.Add(maxAge+grace)), "quiet peer %d: closed before the grace ended", i)
		p.mu.Unlock()
	}
	st := s.Stats()
	assert.Equal(t, map[string]int64{"max_age": 2 * conns}, st.Closed, "nothing but max_age")
	assert.Zero(t, st.GiveUps)
	assert.Positive(t, st.Probes, "the quiet peers' silence was probed in the grace")
	t.Logf("probes %d, retransmissions %d", st.Probes, st.Retransmits)
}

// TestFramed_PeerGoAway: the server checks a peer's GOAWAY. Its last DATA
// must be the last that arrived; after it no new DATA may come, though a
// retransmission is acknowledged again. A violation closes with code 10.
func TestFramed_PeerGoAway(t *testing.T) {
	s := start(t, framedCfg(), nil)
	two := append(frame.AppendData(nil, 1, []byte("a")), frame.AppendData(nil, 2, []byte("b"))...)
	for _, tc := range []struct {
		name string
		send []byte
		want frame.Code // of the CLOSE; 0: none, the connection goes on
	}{
		{name: "last is the last DATA", send: append(two, frame.AppendGoAway(nil, frame.CodeNormal, 2, 0, "")...)},
		{name: "retransmission after it", send: append(append(two, frame.AppendGoAway(nil, frame.CodeNormal, 2, 0, "")...),
			frame.AppendData(nil, 2, []byte("b"))...)},
		{name: "last behind", send: append(two, frame.AppendGoAway(nil, frame.CodeNormal, 1, 0, "")...), want: frame.CodeProtocol},
		{name: "last ahead", send: append(two, frame.AppendGoAway(nil, frame.CodeNormal, 3, 0, "")...), want: frame.CodeProtocol},
		{name: "new DATA after it", send: append(append(two, frame.AppendGoAway(nil, frame.CodeNormal, 2, 0, "")...),
			frame.AppendData(nil, 3, []byte("c"))...), want: frame.CodeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			c.write(tc.send)
			if tc.want != 0 {
				code, _ := c.waitClose(5 * time.Second)
				assert.Equal(t, tc.want, code)
				return
			}
			c.write(frame.AppendPing(nil, 7)) // answered after what came before
			var acked uint64
			pong := false
			for acked < 2 || !pong {
				f, err := c.next(2 * time.Second)
				require.NoError(t, err, "acked %d, pong %v", acked, pong)
				require.NotEqual(t, frame.TypeClose, f.Type, "closed: %s", f.Reason)
				switch f.Type {
				case frame.TypeAck:
					acked = f.Seq
				case frame.TypePong:
					pong = true
				}
			}
			assert.Equal(t, uint64(2), acked)
		})
	}
	assert.Equal(t, int64(3), s.Stats().Closed["protocol_error"])
}

// TestShutdown_DuringMaxAgeGrace: a peer that ignores the max-age GOAWAY
// (but answers its PING) is kept for the grace; a shutdown then tells it
// again, with code 2 and no more than the shutdown's time, and, as the
// peer has read a GOAWAY and has nothing unfinished, closes it at once
// with CLOSE code 2.
func TestShutdown_DuringMaxAgeGrace(t *testing.T) {
	cfg := withAddr(framedCfg())
	cfg.Timeouts = idle.Config{MaxAge: 200 * time.Millisecond, MaxAgeGrace: 10 * time.Second}
	s, err := netserver.New(cfg, netserver.Echo{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	c := dial(t, s)
	c.fc.SetReplies(frame.ReplyAck | frame.ReplyPong)
	f, err := c.next(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, frame.TypeGoAway, f.Type)
	assert.Equal(t, frame.CodeMaxAge, f.Code)
	assert.Equal(t, 10*time.Second, f.Grace)
	f, err = c.next(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, frame.TypePing, f.Type) // answered by the Conn

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	f, err = c.next(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, frame.TypeGoAway, f.Type)
	assert.Equal(t, frame.CodeShutdown, f.Code)
	assert.LessOrEqual(t, f.Grace, 2*time.Second)
	code, _ := c.waitClose(5 * time.Second)
	assert.Equal(t, frame.CodeShutdown, code)
	require.NoError(t, <-done)
	assert.Equal(t, map[string]int64{"shutdown": 1}, s.Stats().Closed)
}

// openedConn dials s and returns once the server has answered a PING: the
// connection is open, and idle.
func openedConn(t *testing.T, s *netserver.Server) *client {
	t.Helper()
	c := dial(t, s)
	c.write(frame.AppendPing(nil, 1))
	_, err := c.next(2 * time.Second)
	require.NoError(t, err)
	return c
}

// TestShutdown_TellsALoneConnection: the GOAWAY Shutdown queues on a loop
// is written out though no other event follows on that loop: a lone idle
// peer answers it and is closed at once.
func TestShutdown_TellsALoneConnection(t *testing.T) {
	cfg := framedCfg()
	cfg.EventLoops = 1
	s := start(t, cfg, nil)
	c := openedConn(t, s)
	c.fc.SetReplies(frame.ReplyAll)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	code, _ := c.waitClose(5 * time.Second)
	assert.Equal(t, frame.CodeShutdown, code)
	_, told := c.fc.GoingAway()
	assert.True(t, told)
	require.NoError(t, <-done)
}

// TestShutdown_Silent: with SilentShutdown the server sends neither GOAWAY
// nor CLOSE; an idle connection is just closed.
func TestShutdown_Silent(t *testing.T) {
	cfg := framedCfg()
	cfg.SilentShutdown = true
	s := start(t, cfg, nil)
	c := openedConn(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
	f, err := c.next(2 * time.Second)
	assert.True(t, errors.Is(err, io.EOF) || isReset(err), "closed with nothing sent; got %+v, %v", f, err)
	assert.Equal(t, int64(1), s.Stats().Closed["shutdown"])
}
