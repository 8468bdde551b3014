// Package attack is the load-test harness's client engine: it opens the
// connections of each scenario against a target, drives them (open-loop
// paced echo traffic, silent or half-silent connections, connections that
// never send, withheld acks, slowloris trickles, connection churn, and the
// hostile peers of hostile.go) and emits one report.ConnResult per
// connection as it ends.
// It knows nothing of reports beyond that stream; the caller folds it into
// figures.
package attack

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/loadtest/internal/fincap"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/retransmit"
)

// Proto is the wire protocol the clients speak.
type Proto = scenario.Proto

// Protocols.
const (
	Raw    = scenario.Raw
	Framed = scenario.Framed
)

// Config is one attack. Conns are this process's share (after sharding).
type Config struct {
	Addr      string
	Proto     Proto
	Sources   []net.IP // local addresses to dial from, round robin; nil: the system's choice
	Scenarios []string
	Conns     map[string]int // connections per scenario (churn: ignored; connflood: all it opens)
	Rate      float64        // echo messages/s per connection (open loop)
	Closed    bool           // echo closed-loop: next message when the previous echo arrives
	Size      int            // message payload bytes (the echo pattern's; ignored with Payload)
	// Payload, raw, is the bytes of each message (nil: Size bytes of a
	// letter pattern, for an echo server).
	Payload []byte
	// Expect, raw, is what an answer to each message must be (zero: the
	// message echoed).
	Expect          Expect
	Duration        time.Duration // echo sending window; churn window; survivor minimum lifetime
	ChurnRate       float64       // churn connections/s
	Timeouts        report.Timeouts
	DialConcurrency int           // dials in flight at once (0: 128)
	AnswerWait      time.Duration // how long an answer is waited for before its message counts as lost (0: DefaultAnswerWait)
	// IdleSpread is the window over which the quiet connections (idle, and
	// keepalive's silent half) send their last message, evenly: connection i
	// of n sends at release + IdleSpread*i/n, where release is when every
	// quiet connection is open (see BarrierTimeout). Spreading the sends
	// spreads the expiries, so neither the server's reaps nor the client's
	// timestamps are measured inside one burst. 0 sends them all at release.
	IdleSpread time.Duration
	// BarrierTimeout bounds the wait for every quiet connection to open
	// (0: 10 s); at the bound the connections open so far go ahead and
	// Outcome.Barrier says so. It bounds connflood's wait for its dials
	// too.
	BarrierTimeout time.Duration
	// HostileBytes bounds what one nonreader or ping flooder sends
	// (0: DefaultHostileBytes); past it, and once Stop is closed, it only
	// trickles a message now and then to notice a close.
	HostileBytes int64
	// Stop, once closed, makes the nonreaders and ping flooders stop
	// flooding, as HostileBytes does: the caller has seen enough (the
	// server's memory passed its bound). nil never stops them.
	Stop <-chan struct{}
	// FINs, if not nil, captures the server's FINs on the loopback: each
	// connection the server was expected to close and closed gets its
	// FIN's kernel timestamp (report.ConnResult.WireFinAt).
	FINs *fincap.Capture
	// FloodHold is how long connflood holds its connections after the last
	// one dialed (0: 1 s). Keep it below the server's idle timeout, or the
	// connections it keeps die idle.
	FloodHold time.Duration
	// CloseHorizon is how long after its expected close a connection waits
	// for the server to close it, so that a late close is measured rather
	// than cut off (0, or less than Timeouts.Slack: the slack). A close on
	// time ends the wait at once; only a late or missing one makes the run
	// longer.
	CloseHorizon time.Duration
	// Proxy, if its Version is set, starts every connection with a PROXY
	// header naming a client of its own, as a balancer would.
	Proxy Proxy
	// Neighbours is how many other sources connect during sourceflood's
	// flood (Conns[scenario.Sourceflood] is the flooding source's
	// connections).
	Neighbours int
}

// Waits of the harness: how long an answer is waited for before its
// message counts as lost (Config.AnswerWait 0), and how long a dial may
// take.
const (
	DefaultAnswerWait = 2 * time.Second
	DialTimeout       = 5 * time.Second
)

// Barrier is how the quiet connections' barrier ended.
type Barrier struct {
	Waiting  int           // quiet connections the barrier waited for
	Arrived  int           // how many had connected or failed when it released
	Wait     time.Duration // from the start of the run to the release
	TimedOut bool          // released by BarrierTimeout rather than by the last arrival
}

// Note says how the barrier ended, for a run whose last messages were
// spread over spread; "" without quiet connections.
func (b Barrier) Note(spread time.Duration) string {
	switch {
	case b.Waiting == 0:
		return ""
	case b.TimedOut:
		return fmt.Sprintf("quiet connections: the barrier gave up after %s with %d of %d open (or failed); the late ones sent at once; last messages spread over %s",
			b.Wait.Round(time.Millisecond), b.Arrived, b.Waiting, spread)
	}
	return fmt.Sprintf("quiet connections: all %d open (or failed) %s after the start; last messages spread over %s", b.Waiting, b.Wait.Round(time.Millisecond), spread)
}

// Counters are live totals for the progress line. Every field is atomic;
// the attack writes them, anyone may read.
type Counters struct {
	Open, Dialed, DialErrors, Sent, Recv, Errors atomic.Int64
	PeakOpen                                     atomic.Int64
	ends                                         sync.Map // end reason -> *atomic.Int64
}

func (c *Counters) end(reason string) {
	v, ok := c.ends.Load(reason)
	if !ok {
		v, _ = c.ends.LoadOrStore(reason, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// Ends returns how many connections ended each way so far.
func (c *Counters) Ends() map[string]int64 {
	m := map[string]int64{}
	c.ends.Range(func(k, v any) bool {
		m[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return m
}

func (c *Counters) opened() {
	n := c.Open.Add(1)
	for {
		p := c.PeakOpen.Load()
		if n <= p || c.PeakOpen.CompareAndSwap(p, n) {
			return
		}
	}
}

// Outcome is what Run returns besides the connection stream.
type Outcome struct {
	Latency map[string]*hist.Histogram // echo latencies, ns, per scenario
	Elapsed map[string]time.Duration   // sending window per scenario
	Barrier Barrier                    // the quiet connections' barrier (zero if none)
}

// Ladder returns the retransmission offsets, from a message's first
// transmission, that a server with these settings follows when no ack ever
// arrives and no RTT sample was taken, and the offset of its give-up
// (RFC 6298 backoff, capped by MaxRTO, cut short by GiveUpAfter), as
// package retransmit computes them.
func Ladder(t report.Timeouts) (offsets []time.Duration, giveUp time.Duration, err error) {
	// retransmit's own resolver gives the defaults of the fields left 0:
	// the harness copies none of them.
	cfg, err := retransmit.Config{InitialRTO: t.InitialRTO, MinRTO: t.MinRTO, MaxRTO: t.MaxRTO,
		MaxRetransmits: t.MaxRetransmits, GiveUpAfter: t.GiveUpAfter}.WithDefaults(t.Tick)
	if err != nil {
		return nil, 0, err
	}
	e, err := retransmit.NewEstimator(cfg)
	if err != nil {
		return nil, 0, err
	}
	maxRetx, limit := cfg.MaxRetransmits, cfg.GiveUpAfter
	if maxRetx < 0 {
		maxRetx = math.MaxInt // Off: no limit on the count
	}
	if limit < 0 {
		limit = time.Duration(math.MaxInt64) // Off: no limit on the time
	}
	at, rto := time.Duration(0), e.RTO()
	for {
		next := min(at+rto, limit)
		if next >= limit || len(offsets) == maxRetx {
			return offsets, next, nil
		}
		offsets = append(offsets, next)
		at, rto = next, e.Backoff()
	}
}

// DialErrKind classifies a dial error: fd_limit (EMFILE/ENFILE),
// ephemeral_ports (EADDRNOTAVAIL/EADDRINUSE), refused, timeout or other.
func DialErrKind(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "fd_limit"
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.EADDRINUSE):
		return "ephemeral_ports"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "other"
}

// run is the state of one Run.
type run struct {
	cfg     Config
	ctr     *Counters
	emit    func(report.ConnResult)
	start   time.Time
	dialSem chan struct{}
	srcNext atomic.Uint64
	// clientNext counts the PROXY clients handed out (Config.Proxy).
	clientNext atomic.Uint64
	ladder     []time.Duration
	giveUp     time.Duration

	mu      sync.Mutex
	outcome Outcome
	payload []byte

	quiet *barrier // nil without quiet connections
	turns *turns   // the quiet connections' turns to send; nil without them
}

// testPauseSender, set only by tests, is called by the open-loop echo
// sender before each batch with the messages sent so far: it may sleep, as
// a stopped process would, so that the next batch catches up.
var testPauseSender func(sent uint64)

// testDialDelay, set only by tests, delays connection i of scenario's dial.
var testDialDelay func(scenario string, i int) time.Duration

// Run performs the attack and returns when every connection has ended:
// each scenario bounds its own time, and ctx ends everything early. Every
// scenario runs at once, but connflood, which runs alone afterwards. emit
// receives each connection's result, from many goroutines at once (it must
// be safe for that). The live counters go to ctr.
func Run(ctx context.Context, cfg Config, ctr *Counters, emit func(report.ConnResult)) (Outcome, error) {
	if cfg.DialConcurrency <= 0 {
		cfg.DialConcurrency = 128
	}
	if cfg.AnswerWait <= 0 {
		cfg.AnswerWait = DefaultAnswerWait
	}
	if cfg.BarrierTimeout <= 0 {
		cfg.BarrierTimeout = 10 * time.Second
	}
	if cfg.HostileBytes <= 0 {
		cfg.HostileBytes = DefaultHostileBytes
	}
	if cfg.FloodHold <= 0 {
		cfg.FloodHold = time.Second
	}
	cfg.CloseHorizon = max(cfg.CloseHorizon, cfg.Timeouts.Slack)
	if cfg.IdleSpread < 0 {
		return Outcome{}, fmt.Errorf("attack: idle spread %s must not be negative", cfg.IdleSpread)
	}
	if cfg.Size <= 0 && len(cfg.Payload) == 0 {
		return Outcome{}, fmt.Errorf("attack: message size %d must be positive", cfg.Size)
	}
	r := &run{cfg: cfg, ctr: ctr, start: time.Now(), dialSem: make(chan struct{}, cfg.DialConcurrency),
		outcome: Outcome{Latency: map[string]*hist.Histogram{}, Elapsed: map[string]time.Duration{}}}
	r.payload = Payload(cfg.Payload, cfg.Size)
	var mu sync.Mutex
	r.emit = func(cr report.ConnResult) { mu.Lock(); emit(cr); mu.Unlock() }
	for _, s := range cfg.Scenarios {
		if s == scenario.Retransmit {
			var err error
			if r.ladder, r.giveUp, err = Ladder(cfg.Timeouts); err != nil {
				return Outcome{}, fmt.Errorf("attack: retransmit settings: %w", err)
			}
		}
	}
	quiet := 0
	for _, s := range cfg.Scenarios {
		for i := range cfg.Conns[s] {
			if scenario.Lookup(s).Quiet(i) {
				quiet++
			}
		}
	}
	var wg, turnsWG sync.WaitGroup
	stopTurns := func() {}
	if quiet > 0 {
		r.quiet = newBarrier(quiet, cfg.BarrierTimeout, collectGarbage)
		r.turns = newTurns(r.quiet, cfg)
		// Its own context: once every connection has ended, turns left
		// for connections that failed or ended early are not waited for.
		tctx, stop := context.WithCancel(ctx)
		turnsWG.Go(func() { r.turns.run(tctx) })
		stopTurns = func() { stop(); turnsWG.Wait() }
	}
	flood := false
	for _, s := range cfg.Scenarios {
		n := cfg.Conns[s]
		rec := &recorder{}
		r.outcome.Latency[s] = &rec.h
		switch s {
		case scenario.Churn:
			wg.Go(func() { r.churn(ctx, rec) })
			continue
		case scenario.Connflood:
			flood = true // alone, afterwards
			continue
		case scenario.Sourceflood:
			continue // alone, after connflood

		case scenario.Echo, scenario.Splitter:
			r.mu.Lock() // churn, started before, writes its own
			r.outcome.Elapsed[s] = cfg.Duration
			r.mu.Unlock()
		}
		for i := range n {
			role := scenario.Lookup(s).Role(cfg.Proto, i)
			wg.Go(func() { r.conn(ctx, s, role, i, n, rec) })
		}
	}
	wg.Wait()
	stopTurns()
	if flood && ctx.Err() == nil {
		r.connflood(ctx)
	}
	if slices.Contains(cfg.Scenarios, scenario.Sourceflood) && ctx.Err() == nil {
		r.sourceflood(ctx)
	}
	if b := r.quiet; b != nil {
		<-b.released // every quiet connection has arrived by now
		b.mu.Lock()
		r.outcome.Barrier = Barrier{Waiting: quiet, Arrived: b.arrived, Wait: b.at.Sub(r.start), TimedOut: b.timedOut}
		b.mu.Unlock()
	}
	return r.outcome, nil
}

// Payload returns each message's payload: p, or, if empty, size bytes of
// a letter pattern, for an echo server.
func Payload(p []byte, size int) []byte {
	if len(p) > 0 {
		return p
	}
	p = make([]byte, size)
	for i := range p {
		p[i] = byte('a' + i%26)
	}
	return p
}

// recorder batches latency samples into a shared histogram.
type recorder struct {
	mu sync.Mutex
	h  hist.Histogram
}

func (rc *recorder) flush(b []int64) {
	rc.mu.Lock()
	for _, v := range b {
		rc.h.Record(v)
	}
	rc.mu.Unlock()
}

// echoes counts one connection's echoes and records their latencies into a
// recorder in batches. onEcho is the reader's (its client.onEcho); the role
// reads recv and waits on got, and calls flush once the reader is done.
type echoes struct {
	rec     *recorder
	latency func(k uint64, at time.Time) int64 // of echo k arriving at at
	batch   []int64
	recv    atomic.Uint64 // echoes arrived
	got     chan struct{} // signalled after each echo
}

func newEchoes(rec *recorder, batch int, latency func(k uint64, at time.Time) int64) *echoes {
	return &echoes{rec: rec, latency: latency, batch: make([]int64, 0, batch), got: make(chan struct{}, 1)}
}

func (e *echoes) onEcho(k uint64, at time.Time) {
	e.batch = append(e.batch, e.latency(k, at))
	if len(e.batch) == cap(e.batch) {
		e.rec.flush(e.batch)
		e.batch = e.batch[:0]
	}
	e.recv.Store(k)
	select {
	case e.got <- struct{}{}:
	default:
	}
}

// flush records what is left of the batch; call it after the reader is done.
func (e *echoes) flush() { e.rec.flush(e.batch) }
