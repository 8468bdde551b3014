package attack

import (
	"context"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"math"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

func TestSendOffset_SpreadsEvenly(t *testing.T) {
	tests := []struct {
		name   string
		spread time.Duration
		i, n   int
		want   time.Duration
	}{
		{name: "first sends at release", spread: time.Second, i: 0, n: 4, want: 0},
		{name: "second of four", spread: time.Second, i: 1, n: 4, want: 250 * time.Millisecond},
		{name: "last stays inside the window", spread: time.Second, i: 3, n: 4, want: 750 * time.Millisecond},
		{name: "no spread", spread: 0, i: 3, n: 4, want: 0},
		{name: "no connections", spread: time.Second, i: 0, n: 0, want: 0},
		{name: "15k over 1s", spread: time.Second, i: 7500, n: 15000, want: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, sendOffset(tt.spread, tt.i, tt.n))
		})
	}
}

func TestIsQuiet(t *testing.T) {
	assert.True(t, scenario.Lookup(scenario.Idle).Quiet(0))
	assert.True(t, scenario.Lookup(scenario.Keepalive).Quiet(1), "odd keepalive connections are the silent half")
	assert.False(t, scenario.Lookup(scenario.Keepalive).Quiet(2), "survivors do not wait")
	assert.False(t, scenario.Lookup(scenario.Echo).Quiet(1))
}

func TestBarrier_ReleasesOnLastArrival(t *testing.T) {
	b := newBarrier(3, time.Hour, nil)
	b.arrive()
	b.arrive()
	select {
	case <-b.released:
		t.Fatal("released before the last arrival")
	default:
	}
	b.arrive()
	<-b.released
	assert.False(t, b.timedOut)
	assert.Equal(t, 3, b.arrived)
	assert.False(t, b.timer.Stop(), "the timeout was stopped at release")
}

func TestBarrier_ReleasesAtTimeout(t *testing.T) {
	start := time.Now()
	b := newBarrier(3, 20*time.Millisecond, nil)
	b.arrive()
	select {
	case <-b.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the timeout did not release the barrier")
	}
	assert.True(t, b.timedOut)
	assert.GreaterOrEqual(t, b.at.Sub(start), 20*time.Millisecond)
	b.arrive() // late arrivals are harmless
	b.mu.Lock()
	assert.Equal(t, 2, b.arrived)
	b.mu.Unlock()
}

func TestBarrier_NoneToWaitFor(t *testing.T) {
	b := newBarrier(0, time.Hour, nil)
	<-b.released
	assert.False(t, b.timedOut)
}

func TestTurns_Order(t *testing.T) {
	cfg := Config{Scenarios: []string{scenario.Idle, scenario.Keepalive}, Conns: map[string]int{scenario.Idle: 4, scenario.Keepalive: 4}, IdleSpread: time.Second}
	tu := newTurns(newBarrier(0, time.Hour, nil), cfg)
	offs := make([]time.Duration, len(tu.order))
	for k, u := range tu.order {
		offs[k] = u.off
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, 250 * ms, 250 * ms, 500 * ms, 750 * ms, 750 * ms}, offs,
		"four idle connections and keepalive's silent half (1 and 3 of 4), earliest first")
	assert.Nil(t, tu.of(scenario.Keepalive, 2), "a survivor has no turn")
	assert.NotNil(t, tu.of(scenario.Keepalive, 3))
	assert.Nil(t, tu.of(scenario.Echo, 0), "a scenario without quiet connections has no turns")
	assert.Nil(t, tu.of(scenario.Idle, 4), "nor a connection beyond the scenario's")
}

// within fails the test unless c delivers within a generous bound.
func within[T any](t *testing.T, c <-chan T, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5 s", what)
	}
}

// TestTurns_OneAtATime checks that the release lets go only the
// connections whose turn has come: the others are not woken (their
// channels stay open) until theirs.
func TestTurns_OneAtATime(t *testing.T) {
	b := newBarrier(1, time.Hour, nil)
	tu := newTurns(b, Config{Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: 3}, IdleSpread: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tu.run(ctx); close(done) }()
	select {
	case <-tu.of(scenario.Idle, 0):
		t.Fatal("a turn came before the release")
	case <-time.After(10 * time.Millisecond):
	}
	b.arrive()
	within(t, tu.of(scenario.Idle, 0), "the first turn, at the release")
	select {
	case <-tu.of(scenario.Idle, 1):
		t.Fatal("the second connection, due 20 minutes after the release, was let go with the first")
	case <-time.After(10 * time.Millisecond):
	}
	cancel()
	within(t, done, "run's return once the context ended")
}

func TestTurns_ContextEndsBeforeRelease(t *testing.T) {
	b := newBarrier(1, time.Hour, nil)
	tu := newTurns(b, Config{Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: 2}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tu.run(ctx); close(done) }()
	cancel()
	within(t, done, "run's return")
	select {
	case <-tu.of(scenario.Idle, 0):
		t.Fatal("a turn was given though the barrier never released")
	default:
	}
}

func TestTurns_SpreadZeroReleasesAll(t *testing.T) {
	b := newBarrier(1, time.Hour, nil)
	tu := newTurns(b, Config{Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: 3}})
	done := make(chan struct{})
	go func() { tu.run(context.Background()); close(done) }()
	b.arrive()
	within(t, done, "run's return")
	for i := range 3 {
		within(t, tu.of(scenario.Idle, i), "a turn")
	}
}

// TestBarrier_BeforeRunsBeforeRelease: the quiet barrier's garbage
// collection must be over before any connection is let go.
func TestBarrier_BeforeRunsBeforeRelease(t *testing.T) {
	var b *barrier
	ran, open := false, false
	b = newBarrier(1, time.Hour, func() {
		ran = true
		select {
		case <-b.released:
		default:
			open = true
		}
	})
	b.arrive()
	within(t, b.released, "the release")
	assert.True(t, ran, "before ran")
	assert.True(t, open, "before ran while the barrier still held")
}

// TestRun_ReturnsWhenQuietDialsFail: the turns of quiet connections that
// never opened are not waited for: Run returns once every connection has
// ended, not at the end of the spread window.
func TestRun_ReturnsWhenQuietDialsFail(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // dials are refused
	cfg := Config{Addr: addr, Proto: Raw, Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: 3}, Size: 8,
		IdleSpread: time.Hour, Timeouts: report.Timeouts{Idle: time.Hour, Slack: time.Second}}
	start := time.Now()
	_, results := runCollect(t, cfg, 3)
	assert.Less(t, time.Since(start), 10*time.Second, "Run waited for the turns")
	for _, r := range results {
		assert.NotEmpty(t, r.DialErr, "the dial was refused")
	}
}

func TestRawReadBuf(t *testing.T) {
	assert.Equal(t, 4<<10, rawReadBuf(64), "small messages: 4 KiB")
	assert.Equal(t, 8<<10, rawReadBuf(2<<10), "four messages")
	assert.Equal(t, 16<<10, rawReadBuf(1<<20), "at most 16 KiB")
}

// startIdleServer starts a raw echo server that closes a connection idle
// for idle, and returns its address.
func startIdleServer(t *testing.T, idle time.Duration) string {
	return serveEach(t, func(c net.Conn) { echo(c, idle, nil) })
}

func TestRun_IdleOpensAllThenSpreadsSends(t *testing.T) {
	const conns = 40
	const idle = 600 * time.Millisecond
	const spread = 200 * time.Millisecond
	addr := startIdleServer(t, idle)
	cfg := Config{Addr: addr, Proto: Raw, Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: conns},
		Size: 16, Duration: 100 * time.Millisecond, IdleSpread: spread, DialConcurrency: 8,
		Timeouts: report.Timeouts{Idle: idle, Tick: time.Millisecond, Slack: 300 * time.Millisecond}}
	lag := lagmeter.New(t)
	out, results := runCollect(t, cfg, conns)

	assert.Equal(t, Barrier{Waiting: conns, Arrived: conns, Wait: out.Barrier.Wait}, out.Barrier, "released by the last arrival")
	// The client's view: every dial completed before the first message was
	// sent. (The server's Accept times lag the handshakes under load, so
	// they cannot decide it.)
	var lastOpen time.Time
	for _, r := range results {
		if r.OpenedAt.After(lastOpen) {
			lastOpen = r.OpenedAt
		}
	}

	var sends []time.Time
	for _, r := range results {
		require.Empty(t, r.Err)
		require.Equal(t, "idle", r.Expect)
		send := r.ExpectedAt.Add(-idle)
		sends = append(sends, send)
		require.False(t, r.ExpectedBy.IsZero(), "raw: the echo's arrival is recorded")
		assert.False(t, r.ExpectedBy.Add(-idle).Before(send), "the answer comes after the send")
		assert.False(t, r.ClosedAt.IsZero(), "reaped")
		// The server's idle clock starts between our send and its answer's
		// arrival: the close is idle after the send at the earliest.
		assert.GreaterOrEqual(t, r.ClosedAt.Sub(send), idle-time.Millisecond, "never closed before idle after the send")
	}
	slices.SortFunc(sends, time.Time.Compare)
	assert.False(t, sends[0].Before(lastOpen), "no message before every connection was open (barrier)")
	span := sends[len(sends)-1].Sub(sends[0])
	assert.Greater(t, span, spread*3/4, "sends spread over the window, not in one burst")
	assert.Less(t, span, spread+lag.Slack(100*time.Millisecond), "sends in the window, late only by what the machine took")
	// Evenly: each half of the window holds about half of the sends.
	mid := sends[0].Add(spread / 2)
	firstHalf := 0
	for _, s := range sends {
		if s.Before(mid) {
			firstHalf++
		}
	}
	assert.InDelta(t, conns/2, firstHalf, conns/5)
}

// runCollect runs cfg, requires it to end without error with a result for
// each of its conns connections, and returns the outcome and the results.
func runCollect(t *testing.T, cfg Config, conns int) (Outcome, []report.ConnResult) {
	t.Helper()
	var mu sync.Mutex
	var results []report.ConnResult
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := Run(ctx, cfg, &Counters{}, func(r report.ConnResult) { mu.Lock(); results = append(results, r); mu.Unlock() })
	require.NoError(t, err)
	require.Len(t, results, conns)
	return out, results
}

// TestRun_QuietKeptAliveAtTheBarrier: a quiet connection that waits at the
// barrier longer than the server's idle timeout (here for one slow dial)
// keeps itself open with keep-alive messages, and its last message, its
// expected close and the answer it records are those of the message sent
// after the release, not of a keep-alive.
func TestRun_QuietKeptAliveAtTheBarrier(t *testing.T) {
	const idle = 600 * time.Millisecond
	testQuietKeptAlive(t, startIdleServer(t, idle), Raw, idle)
}

// testQuietKeptAlive runs 8 idle connections against the server at addr,
// whose idle timeout is idle, with the last one's dial held back 3 idle
// timeouts, and checks what TestRun_QuietKeptAliveAtTheBarrier says.
//
// A keep-alive goes every third of the idle timeout: a harness kept off the
// CPU for the two thirds left (lagmeter's Worst) lets the server close the
// connection, rightly. Such an attempt checks nothing and is run again, a
// few times at most.
func testQuietKeptAlive(t *testing.T, addr string, proto Proto, idle time.Duration) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		if quietKeptAlive(t, addr, proto, idle) {
			return
		}
		require.Less(t, attempt, 4, "the harness was kept off the CPU for two thirds of the idle timeout in every attempt")
	}
}

// quietKeptAlive is one attempt of testQuietKeptAlive. It returns false,
// having checked nothing, when a connection was closed at the barrier and
// the harness was kept off the CPU long enough to explain it.
func quietKeptAlive(t *testing.T, addr string, proto Proto, idle time.Duration) bool {
	t.Helper()
	const conns = 8
	slow := 3 * idle
	testDialDelay = func(_ string, i int) time.Duration {
		if i == conns-1 {
			return slow
		}
		return 0
	}
	t.Cleanup(func() { testDialDelay = nil })
	cfg := Config{Addr: addr, Proto: proto, Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: conns},
		Size: 16, Duration: 100 * time.Millisecond, IdleSpread: 50 * time.Millisecond, DialConcurrency: conns,
		Timeouts: report.Timeouts{Idle: idle, Tick: time.Millisecond, Slack: 300 * time.Millisecond}}
	lag := lagmeter.New(t)
	start := time.Now()
	out, results := runCollect(t, cfg, conns)
	require.False(t, out.Barrier.TimedOut)
	require.GreaterOrEqual(t, out.Barrier.Wait, slow, "the barrier waited for the slow dial")
	for _, r := range results {
		if r.Err != "" && lag.Worst() >= idle-idle/3 {
			t.Logf("a connection ended at the barrier (%s) while the harness was kept off the CPU for %v: again", r.Err, lag.Worst())
			return false
		}
	}
	for _, r := range results {
		require.Empty(t, r.Err, "closed while it waited at the barrier")
		require.Equal(t, "idle", r.Expect)
		send := r.ExpectedAt.Add(-idle)
		assert.False(t, send.Before(start.Add(slow)), "the last message goes after the release")
		assert.False(t, r.ExpectedBy.Add(-idle).Before(send), "the answer recorded is the last message's, not a keep-alive's")
		assert.GreaterOrEqual(t, r.ClosedAt.Sub(send), idle-time.Millisecond, "never closed before idle after the last message")
	}
	return true
}

// TestSurvivorEnd: keepalive's survivors stay until the silent half,
// released from the barrier however late, must have been closed, and no
// end is known while the barrier holds.
func TestSurvivorEnd(t *testing.T) {
	to := report.Timeouts{KeepaliveTime: 500 * time.Millisecond, KeepaliveTimeout: 500 * time.Millisecond, KeepaliveCount: 1, Slack: 300 * time.Millisecond}
	r := &run{cfg: Config{Duration: time.Second, IdleSpread: 200 * time.Millisecond, Timeouts: to}, quiet: newBarrier(1, time.Hour, nil)}
	start := time.Unix(1000, 0)
	_, ok := r.survivorEnd(start)
	assert.False(t, ok, "the barrier holds: the silent half has not sent yet")
	r.quiet.arrive()
	<-r.quiet.released
	end, ok := r.survivorEnd(start)
	require.True(t, ok)
	silent := r.quiet.at.Add(200*time.Millisecond + time.Second + 300*time.Millisecond + 500*time.Millisecond)
	assert.Equal(t, silent, end, "released long after the survivor's start: the silent half's close decides")
	r.quiet = nil
	end, ok = r.survivorEnd(start)
	require.True(t, ok)
	assert.Equal(t, start.Add(r.survivorWindow()), end, "no quiet connections: the survivor window")
}

// TestStartForOnce_WaitsForTheLastMessage: the echoes of keep-alives do not
// signal sendOnce; only the echo of message answerFrom or a later one does.
func TestStartForOnce_WaitsForTheLastMessage(t *testing.T) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	cl := newClient(a, Raw, &Counters{})
	cl.size = 4
	cl.answerFrom.Store(math.MaxUint64) // keep-alives under way
	got := startForOnce(cl)
	_, err := b.Write([]byte("kkkkKKKK")) // two keep-alives echoed
	require.NoError(t, err)
	cl.answerFrom.Store(3) // the last message is the third
	select {
	case <-got:
		t.Fatal("a keep-alive's echo taken for the last message's")
	case <-time.After(20 * time.Millisecond):
	}
	assert.True(t, cl.answeredAt().IsZero(), "no answer recorded for a keep-alive")
	_, err = b.Write([]byte("LAST"))
	require.NoError(t, err)
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the last message's echo did not signal")
	}
	assert.False(t, cl.answeredAt().IsZero())
}
