package attack

import (
	"bytes"
	"context"
	"encoding/binary"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver/frame"
)

func TestCuts_AddUpAndCoverEveryMode(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var whole, bytewise, pieces int
	for range 2000 {
		n := 1 + r.IntN(200)
		c := cuts(r, n)
		sum, ones := 0, 0
		for _, k := range c {
			require.Positive(t, k, "no empty write")
			sum += k
			if k == 1 {
				ones++
			}
		}
		require.Equal(t, n, sum, "the pieces add up to the message")
		switch {
		case len(c) == 1 && n > 1:
			whole++
		case ones == n && n > 1:
			bytewise++
		case len(c) > 1:
			pieces++
			for _, k := range c {
				require.LessOrEqual(t, k, 64)
			}
		}
	}
	assert.Positive(t, whole, "sometimes written whole")
	assert.Positive(t, bytewise, "sometimes a byte per write")
	assert.Positive(t, pieces, "sometimes cut at random boundaries")
	assert.Empty(t, cuts(r, 0))
}

func TestJoined(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	seen := map[int]int{}
	for range 1000 {
		seen[joined(r)]++
	}
	assert.Len(t, seen, 3, "1, 2 or 3 messages: %v", seen)
	assert.Greater(t, seen[1], seen[2])
	assert.Greater(t, seen[2], seen[3])
}

func TestPayload_DeterministicAndDistinct(t *testing.T) {
	assert.Equal(t, payload(7, 1, 61), payload(7, 1, 61), "the checker regenerates what the writer sent")
	assert.NotEqual(t, payload(7, 1, 61), payload(7, 2, 61), "messages differ")
	assert.NotEqual(t, payload(7, 1, 61), payload(8, 1, 61), "connections differ")
	assert.Len(t, payload(7, 1, 61), 61, "sizes not a multiple of 8")
}

// stream returns messages 1..n of a splitter connection, concatenated.
func stream(seed uint64, n, size int) []byte {
	var b []byte
	for k := 1; k <= n; k++ {
		b = append(b, payload(seed, uint64(k), size)...)
	}
	return b
}

func TestStreamCheck(t *testing.T) {
	const seed, size, n = 11, 20, 10
	tests := []struct {
		name           string
		mangle         func([]byte) []byte
		wantChecked    uint64
		wantMismatched uint64
	}{
		{name: "intact", mangle: func(b []byte) []byte { return b }, wantChecked: n},
		{name: "one byte flipped", mangle: func(b []byte) []byte { b[3*size+5] ^= 1; return b }, wantChecked: n, wantMismatched: 1},
		{name: "two messages swapped", mangle: func(b []byte) []byte {
			out := append([]byte{}, b[:size]...)
			out = append(out, b[2*size:3*size]...)
			out = append(out, b[size:2*size]...)
			return append(out, b[3*size:]...)
		}, wantChecked: n, wantMismatched: 2},
		{name: "a byte lost shifts the rest", mangle: func(b []byte) []byte { return append(b[:7*size], b[7*size+1:]...) }, wantChecked: n - 1, wantMismatched: 2},
		{name: "the tail never arrives", mangle: func(b []byte) []byte { return b[:4*size+3] }, wantChecked: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mangle(stream(seed, n, size))
			c := newStreamCheck(seed, size)
			r := rand.New(rand.NewPCG(5, 6))
			for _, k := range cuts(r, len(b)) { // in pieces, as reads return them
				c.feed(b[:k])
				b = b[k:]
			}
			assert.Equal(t, tt.wantChecked, c.Checked(), "checked")
			assert.Equal(t, tt.wantMismatched, c.Mismatched, "mismatched")
		})
	}
}

func TestDataCheck(t *testing.T) {
	const seed, size = 13, 16
	good := func(k uint64) []byte { return payload(seed, k, size) }
	c := newDataCheck(seed, size)
	assert.True(t, c.data(1, good(1)))
	assert.True(t, c.data(2, good(2)))
	assert.False(t, c.data(1, good(1)), "a retransmission is not new")
	assert.Equal(t, uint64(1), c.Dups)
	assert.Zero(t, c.Mismatched)
	assert.True(t, c.data(3, good(4)), "new, but the wrong payload")
	assert.Equal(t, uint64(1), c.Mismatched)
	assert.True(t, c.data(6, good(6)), "a gap")
	assert.Equal(t, uint64(2), c.Gaps)
	assert.Equal(t, uint64(4), c.Checked(), "1, 2, 3 and 6 came back")
	assert.False(t, c.data(2, good(3)), "a retransmission that differs")
	assert.Equal(t, uint64(2), c.Mismatched)
}

func TestGarbage(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	assert.Equal(t, scenario.GarbageRandom, scenario.Lookup(scenario.Garbage).Role(Raw, 1), "raw has no frames to break")
	assert.Equal(t, []string{scenario.GarbageRandom, scenario.GarbageBadType, scenario.GarbageHugeLength, scenario.GarbageRandom},
		[]string{scenario.Lookup(scenario.Garbage).Role(Framed, 0), scenario.Lookup(scenario.Garbage).Role(Framed, 1), scenario.Lookup(scenario.Garbage).Role(Framed, 2), scenario.Lookup(scenario.Garbage).Role(Framed, 3)})

	huge := garbage(r, scenario.GarbageHugeLength, 1024)
	require.Len(t, huge, 1024)
	assert.Equal(t, uint32(HugeLength), binary.BigEndian.Uint32(huge))
	_, _, err := frame.Parse(huge, frame.DefaultMax)
	assert.ErrorIs(t, err, frame.ErrTooLarge)

	for range 100 {
		bad := garbage(r, scenario.GarbageBadType, 64)
		assert.Equal(t, uint32(60), binary.BigEndian.Uint32(bad), "a length that fits")
		_, _, err = frame.Parse(bad, frame.DefaultMax)
		require.ErrorIs(t, err, frame.ErrType, "an unknown type: %d", bad[frame.LenSize])
	}
	a, b := garbage(r, scenario.GarbageRandom, 1024), garbage(r, scenario.GarbageRandom, 1024)
	assert.NotEqual(t, a, b, "random")
	assert.Len(t, garbage(r, scenario.GarbageRandom, 1), frame.DataHeaderSize, "at least a header's worth")
}

// noLeak checks, once the test and its cleanups are done, that no
// goroutine outlived them: call it first. gnet's package-level worker pool
// (ants), started by the first netserver a test of this package runs, lives
// as long as the process and is not the harness's.
func noLeak(t *testing.T) {
	t.Cleanup(func() {
		goleak.VerifyNone(t,
			goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
			goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"))
	})
}

// serveEach is testnet.Serve for a handler that needs no accept index.
func serveEach(t *testing.T, handle func(c net.Conn)) string {
	return testnet.Serve(t, func(c net.Conn, _ uint64) { handle(c) })
}

// startEchoServer starts a raw echo server (serveEach) and returns its
// address; mangle, if set, may change each chunk it echoes (i counts the
// chunks of a connection).
func startEchoServer(t *testing.T, mangle func(i int, b []byte)) string {
	return serveEach(t, func(c net.Conn) { echo(c, 0, mangle) })
}

// echo echoes c's input, chunk by chunk, until the peer closes or is silent
// for idle (0: never); mangle is startEchoServer's.
func echo(c net.Conn, idle time.Duration, mangle func(i int, b []byte)) {
	buf := make([]byte, 4096)
	for i := 0; ; i++ {
		if idle > 0 {
			_ = c.SetReadDeadline(time.Now().Add(idle)) // from the open, then from each read
		}
		n, err := c.Read(buf)
		if n > 0 {
			if mangle != nil {
				mangle(i, buf[:n])
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// runHostile runs the given scenarios against addr and returns the results
// by scenario.
func runHostile(t *testing.T, addr string, p Proto, conns map[string]int, d time.Duration) map[string][]report.ConnResult {
	cfg := Config{Addr: addr, Proto: p, Conns: conns, Rate: 200, Size: 24, Duration: d,
		HostileBytes: 1 << 20, AnswerWait: time.Second, Timeouts: report.Timeouts{Slack: 100 * time.Millisecond}}
	for s := range conns {
		cfg.Scenarios = append(cfg.Scenarios, s)
	}
	var mu sync.Mutex
	out := map[string][]report.ConnResult{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Run(ctx, cfg, &Counters{}, func(r report.ConnResult) { mu.Lock(); out[r.Scenario] = append(out[r.Scenario], r); mu.Unlock() })
	require.NoError(t, err)
	return out
}

func TestRun_SplitterChecksEveryByte(t *testing.T) {
	noLeak(t)
	addr := startEchoServer(t, nil)
	got := runHostile(t, addr, Raw, map[string]int{scenario.Splitter: 3}, 300*time.Millisecond)
	require.Len(t, got[scenario.Splitter], 3)
	for _, r := range got[scenario.Splitter] {
		assert.Positive(t, r.Sent)
		assert.Equal(t, r.Sent, r.Recv, "every message came back")
		assert.Zero(t, r.Mismatch)
		assert.Zero(t, r.Lost)
		assert.Greater(t, r.Writes, r.Sent, "messages were cut into several writes")
		assert.Equal(t, "client", r.End)
		assert.True(t, r.Survivor)
	}
}

func TestRun_SplitterCatchesACorruptServer(t *testing.T) {
	noLeak(t)
	// The server flips a bit of its 5th chunk on every connection.
	addr := startEchoServer(t, func(i int, b []byte) {
		if i == 4 {
			b[len(b)/2] ^= 0x20
		}
	})
	got := runHostile(t, addr, Raw, map[string]int{scenario.Splitter: 2}, 300*time.Millisecond)
	require.Len(t, got[scenario.Splitter], 2)
	for _, r := range got[scenario.Splitter] {
		assert.Equal(t, uint64(1), r.Mismatch, "the one corrupted message is caught")
	}
}

// TestRun_NonreaderAndGarbage: against a server that closes any
// connection after reading 64 KiB from it, as an output limit would, a
// non-reader sees the close soon; garbage sent to a raw server that keeps
// echoing is held to the end.
func TestRun_NonreaderAndGarbage(t *testing.T) {
	noLeak(t)
	addr := serveEach(t, func(c net.Conn) { _, _ = io.CopyN(io.Discard, c, 64<<10) })
	lag := lagmeter.New(t) // after noLeak: stopped before its check
	start := time.Now()
	got := runHostile(t, addr, Raw, map[string]int{scenario.Nonreader: 2}, 2*time.Second)
	require.Len(t, got[scenario.Nonreader], 2)
	for _, r := range got[scenario.Nonreader] {
		assert.Contains(t, []string{"reset", "eof"}, r.End)
		require.False(t, r.ClosedAt.IsZero(), "the close was seen")
		assert.Less(t, r.ClosedAt.Sub(r.Misbehaved), lag.Slack(time.Second), "soon after it began, not at the end of the window")
		assert.GreaterOrEqual(t, r.Bytes, uint64(64<<10), "it sent what the server read at least")
	}
	assert.Less(t, time.Since(start), lag.Slack(5*time.Second))

	addr = startEchoServer(t, nil)
	got = runHostile(t, addr, Raw, map[string]int{scenario.Garbage: 2}, 100*time.Millisecond)
	require.Len(t, got[scenario.Garbage], 2)
	for _, r := range got[scenario.Garbage] {
		assert.Equal(t, scenario.GarbageRandom, r.Role)
		assert.Equal(t, "client", r.End, "a raw echo server echoes anything: held to the end")
		assert.True(t, r.ClosedAt.IsZero())
		assert.Equal(t, uint64(garbageBytes), r.Bytes)
	}
}

// TestRun_HostileAgainstAServerSendingGarbage: a framed server that
// answers with bytes that are no frame, and closes nothing, makes the
// client give up (bad_server_frame). That is no close by the server,
// whether the reader saw it while a flood was writing or after: the
// verdicts must fail, as they did not when the client's give-up was named
// protocol_error, like a server's CLOSE.
func TestRun_HostileAgainstAServerSendingGarbage(t *testing.T) {
	noLeak(t)
	addr := serveEach(t, func(c net.Conn) {
		_, _ = c.Write(garbage(rand.New(rand.NewPCG(3, 4)), scenario.GarbageBadType, 64))
		_, _ = io.Copy(io.Discard, c) // until the client closes
	})
	got := runHostile(t, addr, Framed, map[string]int{scenario.Garbage: 3, scenario.Pingflood: 2}, 200*time.Millisecond)
	for _, tt := range []struct {
		scenario string
		want     string
	}{
		{scenario: scenario.Garbage, want: "3 of 3 garbage connections were not closed by the server"},
		{scenario: scenario.Pingflood, want: "2 of 2 ping flooders were not closed by the server"},
	} {
		t.Run(tt.scenario, func(t *testing.T) {
			s := report.NewScenario(tt.scenario, scenario.Lookup(tt.scenario).Expect)
			s.Hostile, s.Proto = true, Framed.String()
			for _, r := range got[tt.scenario] {
				assert.Equal(t, report.EndBadServerFrame, r.End, r.Role)
				assert.True(t, r.ClosedAt.IsZero(), "%s: the server closed nothing", r.Role)
				s.Add(r, report.Timeouts{}, true)
			}
			require.Equal(t, s.Conns, s.Opened)
			assert.Zero(t, s.ServerClosed)
			bad := verdict(s)
			require.NotEmpty(t, bad)
			assert.Contains(t, bad[0], tt.want)
		})
	}
}

// TestFlood_ReaderGaveUpIsNoServerClose: a flood whose write finds the
// socket closed takes the reader's account of the end; when the reader
// gave up on the server's bytes, that is no close by the server.
func TestFlood_ReaderGaveUpIsNoServerClose(t *testing.T) {
	noLeak(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	sc, err := ln.Accept()
	require.NoError(t, err)
	defer sc.Close()
	_, err = sc.Write(garbage(rand.New(rand.NewPCG(5, 6)), scenario.GarbageBadType, 64))
	require.NoError(t, err)

	ctr := &Counters{}
	ctr.opened()
	cl := newClient(c, Framed, ctr)
	go cl.read()
	<-cl.done // the reader gave up and closed the socket: the flood's first write fails
	r := &run{cfg: Config{Duration: 5 * time.Second, HostileBytes: 1 << 20}, ctr: ctr, start: time.Now()}
	var res report.ConnResult
	var n uint64
	r.flood(context.Background(), cl, &n, frame.AppendPing, &res)
	assert.Equal(t, uint64(1), res.Writes, "the first write found the socket closed")
	assert.Equal(t, report.EndBadServerFrame, res.End)
	assert.True(t, res.ClosedAt.IsZero(), "the server closed nothing")
}

// TestRun_NonreaderStopsOnStop: closing Stop ends the flood at once; the
// connection then only trickles.
func TestRun_NonreaderStopsOnStop(t *testing.T) {
	noLeak(t)
	addr := startEchoServer(t, nil)
	stop := make(chan struct{})
	close(stop)
	cfg := Config{Addr: addr, Proto: Raw, Scenarios: []string{scenario.Nonreader}, Conns: map[string]int{scenario.Nonreader: 1},
		Rate: 1, Size: 64, Duration: 300 * time.Millisecond, Stop: stop}
	var res report.ConnResult
	_, err := Run(context.Background(), cfg, &Counters{}, func(r report.ConnResult) { res = r })
	require.NoError(t, err)
	assert.Less(t, res.Bytes, uint64(floodChunk), "no flood chunk once stopped, only trickled messages")
	assert.Positive(t, res.Bytes)
}

func TestRun_ConnfloodHoldsAfterTheOthers(t *testing.T) {
	noLeak(t)
	// A server that keeps 5 connections until their peers close and closes
	// the rest at once.
	addr := testnet.Serve(t, func(c net.Conn, i uint64) {
		if i < 5 {
			_, _ = io.Copy(io.Discard, c)
		}
	})
	cfg := Config{Addr: addr, Proto: Raw, Scenarios: []string{scenario.Connflood}, Conns: map[string]int{scenario.Connflood: 12},
		Rate: 1, Size: 8, Duration: 10 * time.Millisecond, FloodHold: 200 * time.Millisecond}
	var results []report.ConnResult
	start := time.Now()
	_, err := Run(context.Background(), cfg, &Counters{}, func(r report.ConnResult) { results = append(results, r) })
	require.NoError(t, err)
	require.Len(t, results, 12)
	held, closed := 0, 0
	for _, r := range results {
		require.Empty(t, r.DialErr)
		switch r.End {
		case "client":
			held++
		case "eof", "reset":
			closed++
			assert.False(t, r.ClosedAt.IsZero())
			assert.False(t, r.ClosedAt.Before(r.Misbehaved), "closed after the connect")
		}
	}
	assert.Equal(t, 5, held, "the server's 5")
	assert.Equal(t, 7, closed, "the rest closed by the server")
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "the held ones were held")
}

func TestHugeLength(t *testing.T) {
	assert.True(t, bytes.Equal([]byte{0xFF, 0xFF, 0xFF, 0xF0}, binary.BigEndian.AppendUint32(nil, HugeLength)))
}
