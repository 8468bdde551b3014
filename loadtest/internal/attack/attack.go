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
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/loadtest/internal/fincap"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
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
	ladder  []time.Duration
	giveUp  time.Duration

	mu      sync.Mutex
	outcome Outcome
	payload []byte

	quiet *barrier // nil without quiet connections
	turns *turns   // the quiet connections' turns to send; nil without them
}

// barrier waits until every connection has dialed (successfully or not) or
// the timeout passes, then closes released (the quiet connections' turns
// then let them go one at a time, see turns). arrive may be called from any
// goroutine, once per connection; released is closed once.
//
// Ownership: left and arrived are guarded by mu; at and timedOut are
// written under mu before released is closed and read after <-released;
// before is set by newBarrier.
type barrier struct {
	mu       sync.Mutex
	left     int
	arrived  int
	released chan struct{}
	at       time.Time
	timedOut bool
	timer    *time.Timer
	before   func() // nil, or run under mu just before the release
}

// newBarrier returns a barrier awaiting n arrivals, released at the latest
// after timeout. before, if not nil, runs just before the release, its
// time counted in the wait (Barrier.Wait).
func newBarrier(n int, timeout time.Duration, before func()) *barrier {
	b := &barrier{left: n, released: make(chan struct{}), before: before}
	b.mu.Lock()
	b.timer = time.AfterFunc(timeout, func() { b.release(true) })
	b.mu.Unlock()
	if n <= 0 {
		b.release(false)
	}
	return b
}

func (b *barrier) arrive() {
	b.mu.Lock()
	b.arrived++
	b.left--
	last := b.left == 0
	b.mu.Unlock()
	if last {
		b.release(false)
	}
}

func (b *barrier) release(timedOut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.released:
		return
	default:
	}
	if b.before != nil {
		b.before()
	}
	b.at, b.timedOut = time.Now(), timedOut
	b.timer.Stop()
	close(b.released)
}

// sendOffset is how long after the release quiet connection i of n sends
// its last message: spread evenly over [0, spread).
func sendOffset(spread time.Duration, i, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(float64(spread) * float64(i) / float64(n))
}

// turns lets the quiet connections go one at a time, each at its
// sendOffset in the spread window, rather than all at the barrier's release: 8 000
// goroutines woken at once queue the first senders' readers behind them
// for tens of milliseconds, which the reap figures would charge to the
// server. One goroutine (run) closes each connection's channel at its
// time.
//
// Ownership: ch and order are written by newTurns and only read after.
type turns struct {
	b     *barrier
	ch    map[string][]chan struct{} // scenario -> connection -> its turn (nil: not quiet)
	order []turn                     // every quiet connection's turn, earliest first
}

type turn struct {
	off time.Duration // from the release
	ch  chan struct{}
}

// newTurns returns the turns of cfg's quiet connections, released from b
// and spread over cfg.IdleSpread.
func newTurns(b *barrier, cfg Config) *turns {
	t := &turns{b: b, ch: map[string][]chan struct{}{}}
	for _, s := range cfg.Scenarios {
		n := cfg.Conns[s]
		for i := range n {
			if !scenario.Lookup(s).Quiet(i) {
				continue
			}
			if t.ch[s] == nil {
				t.ch[s] = make([]chan struct{}, n)
			}
			c := make(chan struct{})
			t.ch[s][i] = c
			t.order = append(t.order, turn{off: sendOffset(cfg.IdleSpread, i, n), ch: c})
		}
	}
	slices.SortStableFunc(t.order, func(a, b turn) int { return cmp.Compare(a.off, b.off) })
	return t
}

// of returns the channel closed at quiet connection i of scenario s's turn;
// nil (which blocks forever) if that connection is not quiet.
func (t *turns) of(s string, i int) <-chan struct{} {
	if cs := t.ch[s]; i >= 0 && i < len(cs) {
		return cs[i]
	}
	return nil
}

// collectGarbage runs before the quiet barrier's release: the heap has
// just grown by the connections' buffers, and a collection triggered in the
// spread window would pause this client's reads and sends for tens of
// milliseconds and be charged to the server's reaps. After this one the
// heap's goal is twice what the connections hold, which the allocation-free
// echo path does not reach before they close. (Scenarios that run beside
// the quiet ones, echo say, pause for it once; the barrier's wait counts
// it.)
func collectGarbage() { runtime.GC() }

// run waits for the release and closes each turn's channel at its time; it
// returns when all are closed or ctx ends.
func (t *turns) run(ctx context.Context) {
	select {
	case <-t.b.released:
	case <-ctx.Done():
		return
	}
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for _, u := range t.order {
		if d := time.Until(t.b.at.Add(u.off)); d > 0 {
			tm.Reset(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				return
			}
		}
		close(u.ch)
	}
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

// Hello returns the bytes of a first message over protocol p: framed, a
// DATA frame; raw, the payload. A probe sends it to see the server answer.
func Hello(p Proto, payload []byte) []byte {
	if p == Framed {
		return frame.AppendData(nil, 1, payload)
	}
	return payload
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

// dial opens a connection; rcvBuf > 0 asks for that receive buffer before
// connecting (where the system allows), so that the window the server sees
// is small from the start. It returns the dial time (dialFrom returns its
// start too).
func (r *run) dial(ctx context.Context, rcvBuf int) (net.Conn, time.Duration, error) {
	c, _, dt, err := r.dialFrom(ctx, rcvBuf)
	return c, dt, err
}

// dialFrom is dial, and returns the start of the dial too: the server
// cannot have accepted the connection before it.
func (r *run) dialFrom(ctx context.Context, rcvBuf int) (net.Conn, time.Time, time.Duration, error) {
	select {
	case r.dialSem <- struct{}{}:
	case <-ctx.Done():
		return nil, time.Time{}, 0, ctx.Err()
	}
	defer func() { <-r.dialSem }()
	d := net.Dialer{Timeout: DialTimeout}
	if rcvBuf > 0 {
		d.Control = rcvBufControl(rcvBuf)
	}
	if len(r.cfg.Sources) > 0 {
		ip := r.cfg.Sources[r.srcNext.Add(1)%uint64(len(r.cfg.Sources))]
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	t0 := time.Now()
	c, err := d.DialContext(ctx, "tcp", r.cfg.Addr)
	if err != nil {
		r.ctr.DialErrors.Add(1)
		return nil, t0, 0, err
	}
	r.ctr.Dialed.Add(1)
	r.ctr.opened()
	return c, t0, time.Since(t0), nil
}

// conn runs one connection of a scenario in the given role and emits its
// result.
func (r *run) conn(ctx context.Context, name, role string, i, n int, rec *recorder) {
	spec := scenario.Lookup(name)
	res := report.ConnResult{Scenario: name, Role: role}
	rcvBuf := 0
	if role == scenario.Nonreader || role == scenario.RoleNotReading {
		rcvBuf = nonreaderRcvBuf
	}
	if testDialDelay != nil {
		time.Sleep(testDialDelay(name, i))
	}
	c, dialed, dt, err := r.dialFrom(ctx, rcvBuf)
	res.OpenedAt = time.Now()
	if spec.Quiet(i) {
		r.quiet.arrive()
	}
	if err != nil {
		res.DialErr = DialErrKind(err)
		r.emit(res)
		return
	}
	res.Connect = dt
	cl := r.client(c)
	switch role {
	case scenario.Echo:
		r.echo(ctx, cl, i, n, rec, &res)
	case scenario.Idle:
		r.idle(ctx, cl, i, &res)
	case scenario.Handshake:
		r.handshake(ctx, cl, dialed, &res)
	case scenario.RoleSurvivor:
		r.survivor(ctx, cl, &res)
	case scenario.RoleSilent:
		r.silent(ctx, cl, i, &res)
	case scenario.Retransmit:
		r.retransmit(ctx, cl, &res)
	case scenario.Slowloris:
		r.slowloris(ctx, cl, &res)
	case scenario.Nonreader:
		r.nonreader(ctx, cl, &res)
	case scenario.Splitter:
		r.splitter(ctx, cl, i, n, rec, &res)
	case scenario.RoleReading, scenario.RoleNotReading:
		r.pingflood(ctx, cl, role, &res)
	case scenario.GarbageRandom, scenario.GarbageBadType, scenario.GarbageHugeLength:
		r.garbage(ctx, cl, role, &res)
	}
	cl.shut()
	if res.End == "" { // hostile roles set it themselves
		res.End = cl.end
	}
	res.Mismatch += cl.wrong.Load()
	res.Pings = int(cl.pings.Load())
	if spec.Expects(role) && cl.closedByServer() {
		res.Refusal = cl.refusal(res.Expect != "")
	}
	if cl.closedByServer() && res.Expect != "" && res.Refusal == "" {
		res.ClosedAt = cl.endAt
		// A close by FIN (a reset has none): it passed the kernel before
		// the client read it; the wait is for the capture's goroutine to
		// have read it too.
		if a, ok := cl.c.LocalAddr().(*net.TCPAddr); ok && r.cfg.FINs != nil && (res.End == "eof" || res.End == res.Expect) {
			if ip := a.IP.To4(); ip != nil {
				res.WireFinAt, _ = r.cfg.FINs.Take(fincap.Client{IP: [4]byte(ip), Port: uint16(a.Port)}, res.OpenedAt, 200*time.Millisecond)
			}
		}
	}
	r.emit(res)
}

// client returns a client over c speaking the run's protocol.
func (r *run) client(c net.Conn) *client {
	cl := newClient(c, r.cfg.Proto, r.ctr)
	cl.size, cl.expect, cl.prefix = len(r.payload), r.cfg.Expect.Kind, r.cfg.Expect.Prefix
	return cl
}

// message appends message seq (1-based) in the client's protocol, for
// the writes that bypass the frame.Conn (nonreader's flood).
func (r *run) message(dst []byte, seq uint64) []byte {
	if r.cfg.Proto == Framed {
		return frame.AppendData(dst, seq, r.payload)
	}
	return append(dst, r.payload...)
}

// wait sleeps until t, or until ctx ends or the server closes the connection;
// it reports whether t was reached.
func wait(ctx context.Context, cl *client, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		case <-cl.done:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	case <-cl.done:
		return false
	}
}
