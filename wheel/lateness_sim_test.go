package wheel_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/netwheel/netwheel/wheel"
)

// A randomized check of the lateness promise with the simulated driver:
// timers are armed, re-armed and stopped at random (also from callbacks and
// the batch-end hook), the clock moves by random amounts, and the driver is
// stepped exactly when the real one would wake (its planned time, or a
// wake-up request), sometimes late. Every firing must be neither early nor
// later than its bound; no pending timer may outlive its bound.

var (
	fuzzSeeds = flag.Int("fuzzlate.seeds", 300, "seeds for TestFuzzLateness (thousands find more; each is simulated and fast)")
	fuzzOps   = flag.Int("fuzzlate.ops", 400, "operations per seed")
	fuzzSeed  = flag.Int64("fuzzlate.seed", -1, "run only this seed, verbosely")
)

const fzTick = int64(time.Millisecond)

type fzStamp struct {
	val    time.Duration
	callAt int64 // when the Now call was made
}

type fzSim struct {
	rng                         *rand.Rand
	w                           *wheel.Wheel
	now                         int64
	wakeAt                      int64
	dueAt                       int64 // when the driver actually runs next (its wake-up, late)
	reqAt                       int64 // when a wake-up was requested (MaxInt64: none)
	lateMode                    int   // 0: never late, 1: up to 3 ticks, 2: also up to 300 ms
	tm                          [8]wheel.Timer
	armed                       [8]bool
	early                       [8]int64 // earliest allowed fire time of the latest arming
	base                        [8]int64 // max(early, time of the arming call)
	stamps                      []fzStamp
	log                         []string
	bad                         string
	depth                       int
	nops                        int
	nfired, nwoken, nsteps, ncb int
}

func (s *fzSim) logf(f string, a ...any) {
	s.log = append(s.log, fmt.Sprintf("[t=%.6fms] ", float64(s.now)/1e6)+fmt.Sprintf(f, a...))
}

func (s *fzSim) fail(f string, a ...any) {
	if s.bad == "" {
		s.bad = fmt.Sprintf("[t=%.6fms] ", float64(s.now)/1e6) + fmt.Sprintf(f, a...)
	}
}

func (s *fzSim) bound(i int) int64 {
	return s.base[i] + fzTick + max(0, s.now-min(s.wakeAt, s.reqAt))
}

func (s *fzSim) randDur() time.Duration {
	r := s.rng
	switch p := r.IntN(100); {
	case p < 8:
		return 0
	case p < 10:
		return -time.Duration(r.Int64N(int64(time.Second)))
	case p < 25:
		return time.Duration(r.Int64N(fzTick))
	case p < 55:
		return time.Duration(r.Int64N(50 * fzTick))
	case p < 70:
		return time.Duration(r.Int64N(50)) * time.Millisecond
	case p < 95:
		return time.Duration(r.Int64N(int64(2 * time.Second)))
	default:
		return time.Duration(1+r.Int64N(5)) * time.Hour
	}
}

func (s *fzSim) randAdvance() int64 {
	r := s.rng
	switch p := r.IntN(100); {
	case p < 15:
		return 0
	case p < 45:
		return r.Int64N(fzTick)
	case p < 60:
		return r.Int64N(5) * fzTick // tick multiples
	case p < 90:
		return r.Int64N(50 * fzTick)
	case p < 97:
		return r.Int64N(int64(500 * time.Millisecond))
	default:
		return r.Int64N(int64(5 * time.Second))
	}
}

func (s *fzSim) arm(i int, early int64) {
	s.armed[i] = true
	s.early[i] = early
	s.base[i] = max(early, s.now)
}

// timerOp does one random arming, stop or clock read.
func (s *fzSim) timerOp(where string) {
	r := s.rng
	i := r.IntN(len(s.tm))
	switch p := r.IntN(100); {
	case p < 30:
		d := s.randDur()
		s.logf("%s: T%d.Reset(%v)", where, i, d)
		s.tm[i].Reset(d)
		s.arm(i, s.now+max(int64(d), 0))
	case p < 50:
		d := s.randDur()
		e := s.w.Now()
		s.stamps = append(s.stamps, fzStamp{val: e, callAt: s.now})
		s.logf("%s: T%d.ResetFrom(Now=%v, %v)", where, i, e, d)
		s.tm[i].ResetFrom(e, d)
		s.arm(i, int64(e)+max(int64(d), 0))
	case p < 65:
		d := s.randDur()
		n := s.w.Now()
		s.stamps = append(s.stamps, fzStamp{val: n, callAt: s.now})
		s.logf("%s: T%d.ResetFrom(Now=%v, %v)", where, i, n, d)
		s.tm[i].ResetFrom(n, d)
		s.arm(i, int64(n)+max(int64(d), 0))
	case p < 72 && len(s.stamps) > 0:
		st := s.stamps[max(0, len(s.stamps)-1-r.IntN(8))]
		d := s.randDur()
		s.logf("%s: T%d.ResetFrom(old stamp %v called at %v, %v)", where, i, st.val, time.Duration(st.callAt), d)
		s.tm[i].ResetFrom(st.val, d)
		s.arm(i, int64(st.val)+max(int64(d), 0))
	case p < 88:
		s.logf("%s: T%d.Stop()", where, i)
		got := s.tm[i].Stop()
		if got != s.armed[i] {
			s.fail("T%d.Stop() = %v, model says pending=%v", i, got, s.armed[i])
		}
		s.armed[i] = false
	default:
		n := s.w.Now()
		s.stamps = append(s.stamps, fzStamp{val: n, callAt: s.now})
		s.logf("%s: Now() = %v", where, n)
		if int64(n) != s.now {
			s.fail("Now() = %v, not the time", n)
		}
	}
	if len(s.stamps) > 64 {
		s.stamps = s.stamps[32:]
	}
}

func (s *fzSim) fired(i int) {
	s.logf("T%d fired (early=%.6fms bound=%.6fms)", i, float64(s.early[i])/1e6, float64(s.bound(i))/1e6)
	switch {
	case !s.armed[i]:
		s.fail("T%d fired while stopped", i)
	case s.now < s.early[i]:
		s.fail("T%d fired early: %v before its earliest", i, time.Duration(s.early[i]-s.now))
	case s.now > s.bound(i):
		s.fail("T%d fired late: %v after its earliest (driver lateness %v)",
			i, time.Duration(s.now-s.early[i]), time.Duration(max(0, s.now-min(s.wakeAt, s.reqAt))))
	}
	s.armed[i] = false
	s.nfired++
	if s.depth == 0 && s.rng.IntN(3) == 0 {
		s.ncb++
		s.depth++
		for range 1 + s.rng.IntN(2) {
			s.timerOp(fmt.Sprintf("in T%d callback", i))
		}
		s.depth--
	}
}

func (s *fzSim) batchEnd() {
	if s.depth == 0 && s.rng.IntN(3) == 0 {
		s.depth++
		s.timerOp("batchEnd")
		s.depth--
	}
}

// randLate is how late the driver runs for a wake-up.
func (s *fzSim) randLate() int64 {
	if s.lateMode == 0 || s.rng.IntN(4) != 0 {
		return 0
	}
	if s.lateMode > 1 && s.rng.IntN(10) == 0 {
		return s.rng.Int64N(int64(300 * time.Millisecond))
	}
	return s.rng.Int64N(3 * fzTick)
}

// step runs the driver once, at s.now.
func (s *fzSim) step(why string) {
	if late := s.now - min(s.wakeAt, s.reqAt); late > 0 {
		s.logf("driver runs %v late", time.Duration(late))
	}
	s.nsteps++
	s.wakeAt = s.w.Step()
	s.reqAt = math.MaxInt64
	s.logf("Step (%s) -> wake at %.6fms", why, float64(s.wakeAt)/1e6)
	s.checkPending("after step")
	if s.wakeAt < math.MaxInt64-int64(time.Second) {
		s.dueAt = s.wakeAt + s.randLate()
	} else {
		s.dueAt = math.MaxInt64
	}
	s.noteWake()
}

// noteWake schedules the driver for a wake-up request.
func (s *fzSim) noteWake() {
	if s.reqAt == math.MaxInt64 && s.w.WakeRequested() {
		s.nwoken++
		s.reqAt = s.now
		s.dueAt = min(s.dueAt, s.now+s.randLate())
	}
}

func (s *fzSim) checkPending(when string) {
	for i := range s.tm {
		if s.armed[i] && s.bound(i) < s.now {
			s.fail("T%d still pending %v past its bound %s (driver wakes at %.6fms)",
				i, time.Duration(s.now-s.bound(i)), when, float64(s.wakeAt)/1e6)
		}
		if s.armed[i] != s.tm[i].Pending() {
			s.fail("T%d Pending()=%v, model %v", i, s.tm[i].Pending(), s.armed[i])
		}
	}
}

// settle steps the driver while it is due.
func (s *fzSim) settle() {
	s.noteWake()
	for n := 0; s.bad == "" && s.now >= s.dueAt; n++ {
		if n > 10000 {
			s.fail("driver does not settle")
			return
		}
		s.step("due")
	}
}

func (s *fzSim) advance(d int64) {
	target := s.now + d
	for s.bad == "" && s.dueAt <= target {
		s.now = max(s.now, s.dueAt)
		s.settle()
	}
	s.now = max(s.now, target)
	s.checkPending("as the clock advanced")
}

func runFuzzLate(seed uint64, nops int) *fzSim {
	s := &fzSim{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	s.now = s.rng.Int64N(2) * s.rng.Int64N(fzTick) // the real driver steps right after New
	s.lateMode = int(seed % 3)
	s.w = wheel.NewSimulated(func() int64 { return s.now }, wheel.WithTick(time.Millisecond),
		wheel.WithBatchEnd(s.batchEnd))
	defer s.w.Stop()
	if s.rng.IntN(2) == 0 {
		s.w.SetCanPrecise(false)
	}
	for i := range s.tm {
		s.tm[i].Init(s.w, func() { s.fired(i) })
	}
	s.wakeAt, s.reqAt, s.dueAt = math.MinInt64, math.MaxInt64, s.now
	s.settle()
	for op := 0; op < nops && s.bad == ""; op++ {
		s.nops = op + 1
		if s.rng.IntN(100) < 35 {
			d := s.randAdvance()
			s.logf("advance %v", time.Duration(d))
			s.advance(d)
		} else {
			s.timerOp("op")
		}
		s.settle()
	}
	// Run out the clock: every pending timer must fire within its bound.
	for k := 0; k < 100 && s.bad == ""; k++ {
		s.advance(int64(100 * time.Millisecond))
	}
	return s
}

func TestFuzzLateness(t *testing.T) {
	if *fuzzSeed >= 0 {
		s := runFuzzLate(uint64(*fuzzSeed), *fuzzOps)
		t.Log("\n" + strings.Join(s.log, "\n"))
		if s.bad != "" {
			t.Fatalf("seed %d: %s", *fuzzSeed, s.bad)
		}
		return
	}
	fails := 0
	var fired, woken, steps, cbs int
	defer func() {
		t.Logf("seeds=%d+5 fired=%d steps=%d woken=%d callback-ops=%d", *fuzzSeeds, fired, steps, woken, cbs)
	}()
	// The first seeds, and seeds that found bugs since fixed (an earlier
	// deadline of a queued timer not waking the driver: 238, 393, 408; a
	// timer on the due list re-armed lazily: 698, 1484).
	seeds := []uint64{238, 393, 408, 698, 1484}
	for seed := range uint64(*fuzzSeeds) {
		seeds = append(seeds, seed)
	}
	for _, seed := range seeds {
		s := runFuzzLate(seed, *fuzzOps)
		fired += s.nfired
		woken += s.nwoken
		steps += s.nsteps
		cbs += s.ncb
		if s.bad == "" {
			continue
		}
		fails++
		// -fuzzlate.seed replays the seed with its operation log.
		t.Errorf("seed %d (after %d ops, %d log lines): %s", seed, s.nops, len(s.log), s.bad)
		if fails >= 10 {
			break
		}
	}
}
