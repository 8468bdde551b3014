package netserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/internal/testpeer"
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

// dialPeer connects a testpeer to addr with the given replies, and starts
// its echo reader.
func dialPeer(t *testing.T, addr string, replies frame.Reply) *testpeer.Peer {
	t.Helper()
	p, err := testpeer.Dial(t, addr, 0)
	require.NoError(t, err)
	require.NoError(t, p.SetDeadline(time.Now().Add(30*time.Second)))
	p.Frames.SetReplies(replies)
	p.StartEchoes()
	return p
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
	peers := make([]*testpeer.Peer, conns)
	for i := range peers {
		peers[i] = dialPeer(t, addr, frame.ReplyAll)
		go peers[i].SendEvery(50 * time.Millisecond)
	}
	require.Eventually(t, func() bool { // every peer busy: echoes coming back
		for _, p := range peers {
			if p.Tally().Echoes < 5 {
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
		r := p.Wait(5 * time.Second)
		assert.NoError(t, r.Err, "peer %d", i)
		assert.Equal(t, frame.CodeShutdown, r.Code, "peer %d: final CLOSE", i)
		assert.Equal(t, r.Sent, r.Echoes, "peer %d: every DATA sent is echoed", i)
		assert.EqualValues(t, r.Sent, p.Frames.Acked(), "peer %d: every DATA sent is acknowledged", i)
		away, ok := p.Frames.GoingAway()
		if assert.True(t, ok, "peer %d: told GOAWAY", i) {
			assert.Equal(t, frame.CodeShutdown, away.Code)
			assert.LessOrEqual(t, away.Grace, 5*time.Second)
			if away.At.Before(r.Closed) {
				inFlight++
			}
		}
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
	busy := make([]*testpeer.Peer, conns)
	quiet := make([]*testpeer.Peer, conns)
	for i := range conns {
		busy[i] = dialPeer(t, addr, frame.ReplyAll)
		go busy[i].SendEvery(50 * time.Millisecond)
		quiet[i] = dialPeer(t, addr, frame.ReplyAck|frame.ReplyPong)
		go quiet[i].SendEvery(3 * time.Second)
	}
	for _, p := range append(busy, quiet...) {
		p.Wait(maxAge + grace + 5*time.Second)
	}
	for i, p := range busy {
		r := p.Tally()
		assert.NoError(t, r.Err, "busy peer %d", i)
		assert.Equal(t, frame.CodeMaxAge, r.Code, "busy peer %d: final CLOSE", i)
		assert.Positive(t, r.Sent)
		assert.Equal(t, r.Sent, r.Echoes, "busy peer %d: every DATA sent is echoed", i)
		assert.EqualValues(t, r.Sent, p.Frames.Acked(), "busy peer %d: every DATA sent is acknowledged", i)
		assert.False(t, r.Closed.Before(p.Dialed.Add(maxAge)), "busy peer %d: closed before its max age", i)
		assert.True(t, r.Closed.Before(p.Dialed.Add(maxAge+grace)), "busy peer %d: kept to the end of the grace, though finished", i)
		away, ok := p.Frames.GoingAway()
		if assert.True(t, ok, "busy peer %d: told GOAWAY", i) {
			assert.Equal(t, frame.CodeMaxAge, away.Code)
			assert.Equal(t, grace, away.Grace)
		}
	}
	for i, p := range quiet {
		r := p.Tally()
		assert.NoError(t, r.Err, "quiet peer %d", i)
		assert.Equal(t, frame.CodeMaxAge, r.Code, "quiet peer %d: final CLOSE", i)
		assert.GreaterOrEqual(t, r.Sent, 2, "quiet peer %d sent in the grace too", i)
		assert.Equal(t, r.Sent, r.Echoes, "quiet peer %d: every DATA sent is echoed", i)
		assert.False(t, r.Closed.Before(p.Dialed.Add(maxAge+grace)), "quiet peer %d: closed before the grace ended", i)
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
			c.Push(tc.send)
			if tc.want != 0 {
				code, _ := c.WaitClose(5 * time.Second)
				assert.Equal(t, tc.want, code)
				return
			}
			c.Push(frame.AppendPing(nil, 7)) // answered after what came before
			var acked uint64
			pong := false
			for acked < 2 || !pong {
				f, err := c.Next(2 * time.Second)
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
	c.Frames.SetReplies(frame.ReplyAck | frame.ReplyPong)
	f, err := c.Next(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, frame.TypeGoAway, f.Type)
	assert.Equal(t, frame.CodeMaxAge, f.Code)
	assert.Equal(t, 10*time.Second, f.Grace)
	f, err = c.Next(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, frame.TypePing, f.Type) // answered by the Conn

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	f, err = c.Next(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, frame.TypeGoAway, f.Type)
	assert.Equal(t, frame.CodeShutdown, f.Code)
	assert.LessOrEqual(t, f.Grace, 2*time.Second)
	code, _ := c.WaitClose(5 * time.Second)
	assert.Equal(t, frame.CodeShutdown, code)
	require.NoError(t, <-done)
	assert.Equal(t, map[string]int64{"shutdown": 1}, s.Stats().Closed)
}

// openedConn dials s and returns once the server has answered a PING: the
// connection is open, and idle.
func openedConn(t *testing.T, s *netserver.Server) *testpeer.Peer {
	t.Helper()
	c := dial(t, s)
	c.Push(frame.AppendPing(nil, 1))
	_, err := c.Next(2 * time.Second)
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
	c.Frames.SetReplies(frame.ReplyAll)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	code, _ := c.WaitClose(5 * time.Second)
	assert.Equal(t, frame.CodeShutdown, code)
	_, told := c.Frames.GoingAway()
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
	f, err := c.Next(2 * time.Second)
	assert.True(t, testpeer.Closed(err), "closed with nothing sent; got %+v, %v", f, err)
	assert.Equal(t, int64(1), s.Stats().Closed["shutdown"])
}
