package retransmit_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

const ms = time.Millisecond

// deferred is a wheel executor that holds expired callbacks until the test
// runs them, to stage an expiry racing an ack deterministically.
type deferred struct{ fs []func() }

func (d *deferred) exec(f func()) { d.fs = append(d.fs, f) }

func (d *deferred) runAll() {
	fs := d.fs
	d.fs = nil
	for _, f := range fs {
		f()
	}
}

func newDeferredTracker(t *testing.T, cfg retransmit.Config) (*wheel.ManualClock, *wheel.Wheel, *deferred, *recorder, *retransmit.Tracker) {
	t.Helper()
	clk := wheel.NewManualClock()
	d := &deferred{}
	w := wheel.New(wheel.WithClock(clk), wheel.WithExecutor(d.exec))
	t.Cleanup(w.Stop)
	rec := &recorder{clk: clk}
	tr, err := retransmit.NewTracker(w, cfg, rec.handlers())
	require.NoError(t, err)
	return clk, w, d, rec, tr
}

// An expiry that was already on its way when an ack restarted the timer must
// not retransmit: the restarted timer's own expiry decides.
func TestTracker_StaleExpiryAfterRestart(t *testing.T) {
	clk, _, d, rec, tr := newDeferredTracker(t, retransmit.Config{})
	require.NoError(t, tr.Sent(0, 0))
	require.NoError(t, tr.Sent(1, 0))
	clk.Advance(time.Second) // RTO 1 s: the expiry is handed to the executor
	require.Len(t, d.fs, 1)
	require.True(t, tr.Acked(0, time.Second)) // ack of the oldest: restart (RTO 1 s after a 1 s sample is 3 s)
	d.runAll()
	assert.Empty(t, rec.actions, "stale expiry retransmitted")
	clk.Advance(3*time.Second - ms)
	d.runAll()
	assert.Empty(t, rec.actions)
	clk.Advance(ms)
	d.runAll()
	assert.Equal(t, []goldenAction{{At: int64(4 * time.Second), Kind: "retransmit", Seq: 1, Attempt: 1}}, rec.actions)
}

func TestTracker_StaleExpiryAfterLastAck(t *testing.T) {
	clk, w, d, rec, tr := newDeferredTracker(t, retransmit.Config{})
	require.NoError(t, tr.Sent(0, 0))
	clk.Advance(time.Second)
	require.Len(t, d.fs, 1)
	require.Equal(t, 1, tr.AckedThrough(0, time.Second))
	d.runAll()
	assert.Empty(t, rec.actions)
	assert.Zero(t, w.Len(), "timer left armed with nothing outstanding")
	// A send after the stale expiry starts a fresh timer from its own time.
	require.NoError(t, tr.Sent(1, clk.Now()))
	// SRTT 1 s, RTTVAR 0.5 s: RTO 3 s from t=1 s.
	clk.Advance(3*time.Second - ms)
	d.runAll()
	assert.Empty(t, rec.actions)
	clk.Advance(ms)
	d.runAll()
	assert.Equal(t, []goldenAction{{At: int64(4 * time.Second), Kind: "retransmit", Seq: 1, Attempt: 1}}, rec.actions)
}

func TestTracker_StaleExpiryAfterClose(t *testing.T) {
	clk, w, d, rec, tr := newDeferredTracker(t, retransmit.Config{})
	require.NoError(t, tr.Sent(0, 0))
	clk.Advance(time.Second)
	tr.Stop()
	d.runAll()
	assert.Empty(t, rec.actions)
	assert.Zero(t, w.Len())
	assert.ErrorIs(t, tr.Sent(1, clk.Now()), retransmit.ErrStopped)
	assert.False(t, tr.Acked(0, clk.Now()))
	assert.True(t, tr.Stats().Stopped)
	tr.Stop() // idempotent
}

func TestTracker_CloseStopsTimer(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	rec := &recorder{clk: clk}
	tr, err := retransmit.NewTracker(w, retransmit.Config{}, rec.handlers())
	require.NoError(t, err)
	require.NoError(t, tr.Sent(0, 0))
	require.Equal(t, 1, w.Len())
	tr.Stop()
	assert.Zero(t, w.Len())
	clk.Advance(time.Minute)
	assert.Empty(t, rec.actions)
}

// Hooks run without the Tracker's lock: they may call back into it.
func TestTracker_HooksMayCallTracker(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	var tr *retransmit.Tracker
	var giveUpSentErr error
	var retransmitStats []retransmit.Stats
	tr, err := retransmit.NewTracker(w, retransmit.Config{MaxRetransmits: 2}, retransmit.Hooks{
		Retransmit: func(seq uint64, attempt int) { retransmitStats = append(retransmitStats, tr.Stats()) },
		GiveUp:     func(err error) { giveUpSentErr = tr.Sent(1, clk.Now()); tr.Stop() },
		Sample:     func(time.Duration) { _ = tr.Stats() },
	})
	require.NoError(t, err)
	require.NoError(t, tr.Sent(0, 0))
	clk.Advance(time.Minute) // 1 s, 3 s: retransmit; 7 s: give up
	require.Len(t, retransmitStats, 2)
	assert.Equal(t, 1, retransmitStats[0].Backoffs)
	assert.Equal(t, 2*time.Second, retransmitStats[0].RTO)
	assert.Equal(t, uint64(2), retransmitStats[1].Retransmits)
	assert.ErrorIs(t, giveUpSentErr, retransmit.ErrStopped)
}

func TestTracker_NothingSentYet(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	tr, err := retransmit.NewTracker(w, retransmit.Config{}, (&recorder{clk: clk}).handlers())
	require.NoError(t, err)
	assert.False(t, tr.Acked(0, 0))
	assert.False(t, tr.AckedAttempt(0, 0, 0))
	assert.Zero(t, tr.AckedThrough(0, 0))
	assert.Zero(t, tr.AckedThrough(math.MaxUint64, 0))
	assert.Zero(t, w.Len())
}

func TestTracker_SequenceWraps(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	tr, err := retransmit.NewTracker(w, retransmit.Config{Window: 4}, (&recorder{clk: clk}).handlers())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), tr.Next(), "before the first Sent, which may carry any seq")
	require.NoError(t, tr.Sent(math.MaxUint64-1, 0))
	require.NoError(t, tr.Sent(math.MaxUint64, 0))
	assert.Zero(t, tr.Next())
	require.NoError(t, tr.Sent(0, 0))
	require.NoError(t, tr.Sent(1, 0))
	assert.ErrorIs(t, tr.Sent(2, 0), retransmit.ErrWindowFull)
	assert.ErrorIs(t, tr.Sent(5, 0), retransmit.ErrSequence)
	assert.Equal(t, uint64(2), tr.Next(), "failed Sents leave it")
	assert.False(t, tr.Acked(2, 0), "never sent")
	assert.Equal(t, 3, tr.AckedThrough(0, 10*ms))
	assert.Equal(t, 1, tr.Stats().Outstanding)
	require.NoError(t, tr.Sent(2, 10*ms))
	assert.True(t, tr.Acked(2, 20*ms))
	assert.Equal(t, 1, tr.AckedThrough(2, 20*ms), "the cumulative ack covers 1; 2 was acked already")
	assert.Zero(t, w.Len())
	require.True(t, tr.Stop())
	assert.Equal(t, uint64(3), tr.Next(), "acks and Stop leave it")
}

func TestTracker_RingGrowsToWindow(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	tr, err := retransmit.NewTracker(w, retransmit.Config{Window: 100}, (&recorder{clk: clk}).handlers())
	require.NoError(t, err)
	assert.Equal(t, 8, tr.RingLen())
	for s := range uint64(100) {
		require.NoError(t, tr.Sent(s, 0), "seq %d", s)
	}
	assert.Equal(t, 128, tr.RingLen())
	assert.ErrorIs(t, tr.Sent(100, 0), retransmit.ErrWindowFull)
	// Entries survived re-indexing: selective acks find them.
	for s := uint64(99); s > 0; s-- {
		require.True(t, tr.Acked(s, ms), "seq %d", s)
	}
	assert.Equal(t, 1, tr.Stats().Outstanding)
	assert.Equal(t, 1, tr.AckedThrough(99, ms))
	assert.Zero(t, w.Len())
}

// Karn's rule holds for cumulative acks too: one covering only retransmitted
// messages leaves the backoff in place.
func TestTracker_KarnCumulative(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	rec := &recorder{clk: clk}
	tr, err := retransmit.NewTracker(w, retransmit.Config{}, rec.handlers())
	require.NoError(t, err)
	require.NoError(t, tr.Sent(0, 0))
	clk.Advance(time.Second)
	require.Len(t, rec.actions, 1)
	assert.Equal(t, 1, tr.AckedThrough(0, 1100*ms))
	st := tr.Stats()
	assert.Zero(t, st.Samples)
	assert.Equal(t, 1, st.Backoffs)
	assert.Equal(t, 2*time.Second, st.RTO)
	assert.Empty(t, rec.samples)
}

func TestTracker_AllocsPerRun(t *testing.T) {
	clk := wheel.NewManualClock()
	w := wheel.New(wheel.WithClock(clk))
	defer w.Stop()
	tr, err := retransmit.NewTracker(w, retransmit.Config{}, retransmit.Hooks{
		Retransmit: func(uint64, int) {}, GiveUp: func(error) {}, Sample: func(time.Duration) {},
	})
	require.NoError(t, err)
	seq := uint64(0)
	require.NoError(t, tr.Sent(seq, 0)) // keep one outstanding so the timer stays armed
	// Warm the ring up to a working window of 64.
	for i := range uint64(64) {
		require.NoError(t, tr.Sent(seq+1+i, 0))
	}
	tr.AckedThrough(seq+64, 0)
	seq += 65
	now := time.Duration(0)
	tests := []struct {
		name string
		op   func()
	}{
		{name: "Sent+AckedThrough", op: func() {
			_ = tr.Sent(seq, now)
			_ = tr.Sent(seq+1, now)
			tr.AckedThrough(seq+1, now)
			seq += 2
		}},
		{name: "Sent+Acked", op: func() {
			_ = tr.Sent(seq, now)
			tr.Acked(seq, now)
			seq++
		}},
		{name: "Sent+AckedAttempt", op: func() {
			_ = tr.Sent(seq, now)
			tr.AckedAttempt(seq, 0, now)
			seq++
		}},
		{name: "Stats", op: func() { _ = tr.Stats() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(1000, tt.op))
		})
	}
	t.Run("expiry", func(t *testing.T) {
		require.NoError(t, tr.Sent(seq, clk.Now()))
		seq++
		before := tr.Stats().Retransmits
		allocs := testing.AllocsPerRun(5, func() { clk.Advance(61 * time.Second) })
		assert.Greater(t, tr.Stats().Retransmits, before)
		assert.Zero(t, allocs)
	})
}

// A stress run on a real-clock wheel with RTOs near the tick, so expiries
// race acks from another goroutine; run it with -race. It checks that every
// retransmitted seq had been sent, and that the tracker ends clean.
func TestTracker_ConcurrentExpiryAndAcks(t *testing.T) {
	w := wheel.New(wheel.WithTick(wheel.MinTick))
	defer w.Stop()
	// One past the highest seq offered to Sent: stored before the call,
	// since the timer may fire for a seq as soon as Sent has recorded it,
	// before Sent returns to this goroutine.
	var sentThrough atomic.Uint64
	var retransmits atomic.Int64
	var badMu sync.Mutex
	var bad []string // what went wrong on the wheel's goroutine, the first few
	fail := func(format string, args ...any) {
		badMu.Lock()
		defer badMu.Unlock()
		if len(bad) < 5 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	tr, err := retransmit.NewTracker(w, retransmit.Config{
		MinRTO: 200 * time.Microsecond, InitialRTO: 200 * time.Microsecond, MaxRTO: time.Millisecond,
		MaxRetransmits: 1 << 30, Window: 64,
	}, retransmit.Hooks{
		Retransmit: func(seq uint64, attempt int) {
			retransmits.Add(1)
			if through := sentThrough.Load(); seq >= through {
				fail("retransmit of seq %d, never offered (%d offered)", seq, through)
			}
			if attempt < 1 {
				fail("retransmit of seq %d with attempt %d", seq, attempt)
			}
		},
		GiveUp: func(err error) { fail("give-up: %v", err) },
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var stop atomic.Bool
	wg.Add(1)
	go func() { // a reader, as a metrics scraper would be
		defer wg.Done()
		for !stop.Load() {
			_ = tr.Stats()
		}
	}()
	deadline := time.Now().Add(150 * time.Millisecond)
	seq := uint64(0)
	for i := 0; time.Now().Before(deadline); i++ {
		now := w.Now()
		sentThrough.Store(seq + 1)
		if err := tr.Sent(seq, now); err == nil {
			seq++
		} else {
			require.ErrorIs(t, err, retransmit.ErrWindowFull)
			sentThrough.Store(seq)
		}
		if next := tr.Next(); next != seq { // read without the mutex, raced by the expiry under -race
			require.Equal(t, seq, next)
		}
		switch i % 5 {
		case 0:
			tr.AckedThrough(seq-1-uint64(i%7), now)
		case 3:
			tr.Acked(seq-2, now)
		}
	}
	tr.AckedThrough(seq-1, w.Now())
	stop.Store(true)
	wg.Wait()
	// A handler call decided before the last ack may still be running on the
	// wheel's goroutine; Stop waits for it, so the counts below are final.
	w.Stop()
	st := tr.Stats()
	assert.Zero(t, st.Outstanding)
	badMu.Lock()
	assert.Empty(t, bad)
	badMu.Unlock()
	assert.Equal(t, uint64(retransmits.Load()), st.Retransmits)
	assert.Equal(t, seq, st.Acked)
	assert.False(t, st.Stopped)
	t.Logf("sent %d, retransmits %d", seq, retransmits.Load())
}

// TestTracker_AckedAttemptAfterExpiry: an ack of a retransmission, with a
// now read after the retransmission, yields an RTT sample that ends the
// backoff: the expiry records the retransmission's send time from the
// clock it reads, never ahead of a later reading. Had it recorded a later
// time (or one from another clock), the sample would be negative, which is
// dropped, and the RTO would stay backed off. This runs a real wheel with a
// 50 ms tick, whose expiry reads the monotonic clock, and waits for the
// retransmission (about 100 ms); it never sleeps.
func TestTracker_AckedAttemptAfterExpiry(t *testing.T) {
	w := wheel.New(wheel.WithTick(50 * ms))
	defer w.Stop()
	retransmitted := make(chan int, 1)
	var samples []time.Duration
	cfg := retransmit.Config{InitialRTO: 100 * ms, MinRTO: 100 * ms}
	tr, err := retransmit.NewTracker(w, cfg, retransmit.Hooks{
		Retransmit: func(_ uint64, attempt int) { retransmitted <- attempt },
		GiveUp:     func(err error) { t.Errorf("gave up: %v", err) },
		Sample:     func(rtt time.Duration) { samples = append(samples, rtt) },
	})
	require.NoError(t, err)
	defer tr.Stop()
	require.NoError(t, tr.Sent(0, w.Now()))
	var attempt int
	select {
	case attempt = <-retransmitted:
	case <-time.After(10 * time.Second):
		t.Fatal("no retransmission")
	}
	require.Equal(t, 1, attempt)
	require.Equal(t, 1, tr.Stats().Backoffs)

	require.True(t, tr.AckedAttempt(0, attempt, w.Now()))
	st := tr.Stats()
	require.Equal(t, uint64(1), st.Samples,
		"the ack of the latest transmission yielded no sample: its now was behind the recorded send time")
	require.Len(t, samples, 1)
	assert.GreaterOrEqual(t, samples[0], time.Duration(0))
	assert.Zero(t, st.Backoffs, "the sample ends the backoff")
	want, err := retransmit.NewEstimator(retransmit.Config{InitialRTO: cfg.InitialRTO, MinRTO: cfg.MinRTO, Granularity: w.Tick()})
	require.NoError(t, err)
	want.Sample(samples[0])
	assert.Equal(t, want.RTO(), st.RTO, "the RTO is recomputed from the sample")
}
