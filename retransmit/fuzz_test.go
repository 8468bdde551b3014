package retransmit_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// byteReader turns fuzz input into numbers, yielding zeros when exhausted.
type byteReader struct{ b []byte }

func (r *byteReader) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *byteReader) u32() uint32 {
	var buf [4]byte
	n := copy(buf[:], r.b)
	r.b = r.b[n:]
	return binary.LittleEndian.Uint32(buf[:])
}

// estModel is the obvious RFC 6298 estimator: it doubles the stored RTO on a
// timeout, where the package keeps a base and a shift.
type estModel struct {
	minN, maxN, gN   int64
	linux            bool
	srtt, rttvar, rt int64
	n                int
}

func (m *estModel) sample(r int64) {
	if m.n == 0 {
		m.srtt, m.rttvar = r, r/2
	} else {
		d := m.srtt - r
		if d < 0 {
			d = -d
		}
		m.rttvar = (3*m.rttvar + d) / 4
		m.srtt = (7*m.srtt + r) / 8
	}
	m.n++
	v := max(m.gN, 4*m.rttvar)
	if m.linux {
		m.rt = min(m.maxN, m.srtt+max(v, m.minN))
	} else {
		m.rt = min(m.maxN, max(m.minN, m.srtt+v))
	}
}

func FuzzEstimator(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{3, 200, 1, 0, 0, 10, 0, 0, 0, 1, 1, 1, 1, 0, 255, 255, 255, 255})
	f.Add([]byte{255, 1, 255, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 5, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{data}
		// Config: MinRTO 1 us .. 255 ms, MaxRTO MinRTO .. +2^k ms, G 0 .. 255 us.
		flags := r.u8()
		minRTO := time.Duration(r.u8())*time.Millisecond + time.Microsecond
		maxRTO := minRTO + time.Duration(1)<<(r.u8()%40)*time.Microsecond
		gran := time.Duration(r.u8()) * time.Microsecond
		cfg := retransmit.Config{MinRTO: minRTO, MaxRTO: maxRTO, Granularity: gran,
			InitialRTO: time.Duration(r.u32()) * time.Microsecond}
		if flags&1 != 0 {
			cfg.Variant = retransmit.Linux
		}
		e, err := retransmit.NewEstimator(cfg)
		require.NoError(t, err)
		m := &estModel{minN: int64(minRTO), maxN: int64(maxRTO), gN: int64(gran), linux: flags&1 != 0}
		if gran == 0 {
			m.gN = int64(wheel.DefaultTick)
		}
		m.rt = min(max(int64(cfg.InitialRTO), m.minN), m.maxN)
		if cfg.InitialRTO == 0 {
			m.rt = min(max(int64(time.Second), m.minN), m.maxN)
		}
		backoffs := 0
		for len(r.b) > 0 {
			prevRTO := e.RTO()
			switch op := r.u8(); {
			case op%4 == 0:
				require.Equal(t, min(2*m.rt, m.maxN), int64(e.Backoff()))
				m.rt = min(2*m.rt, m.maxN)
				backoffs++
				require.GreaterOrEqual(t, e.RTO(), prevRTO, "backoff lowered the RTO")
			case op%4 == 1:
				rtt := -time.Duration(r.u32())
				require.Equal(t, rtt == 0, e.Sample(rtt), "negative samples are ignored")
				if rtt == 0 {
					m.sample(0)
					backoffs = 0
				}
			default:
				rtt := time.Duration(r.u32()) << (op % 16) * time.Nanosecond
				require.True(t, e.Sample(rtt))
				m.sample(int64(min(rtt, retransmit.MaxSample)))
				backoffs = 0
			}
			rto := e.RTO()
			require.Positive(t, rto)
			require.GreaterOrEqual(t, rto, minRTO, "RTO below MinRTO")
			require.LessOrEqual(t, rto, maxRTO, "RTO above MaxRTO")
			require.Equal(t, backoffs, e.Backoffs(), "backoff count")
			require.Equal(t, m.rt, int64(rto), "RTO differs from the model")
			require.Equal(t, m.srtt, int64(e.SRTT()))
			require.Equal(t, m.rttvar, int64(e.RTTVar()))
			require.GreaterOrEqual(t, e.SRTT(), time.Duration(0))
			require.GreaterOrEqual(t, e.RTTVar(), time.Duration(0))
		}
	})
}

// FuzzTracker drives a Tracker with random sends, acks and clock advances
// against a model of the outstanding set, and checks RFC 6298 section 5's
// timer rule: the timer is armed exactly while something is outstanding,
// and an expiry retransmits the oldest outstanding message.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 3, 10, 4, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 255, 3, 255, 1, 2, 2, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{data}
		window := int(r.u8()%16) + 1
		clk := wheel.NewManualClock()
		w := wheel.New(wheel.WithClock(clk))
		defer w.Stop()
		type event struct {
			seq     uint64
			attempt int
			giveUp  bool
		}
		var events []event
		tr, err := retransmit.NewTracker(w, retransmit.Config{Window: window, MaxRetransmits: 5, GiveUpAfter: 20 * time.Second},
			retransmit.Hooks{
				Retransmit: func(seq uint64, attempt int) { events = append(events, event{seq: seq, attempt: attempt}) },
				GiveUp:     func(error) { events = append(events, event{giveUp: true}) },
			})
		require.NoError(t, err)
		acked := map[uint64]bool{} // seq -> acked, for every seq sent
		retx := map[uint64]int{}
		var next, head uint64
		closed := false
		for len(r.b) > 0 {
			now := clk.Now()
			switch op := r.u8(); op % 4 {
			case 0:
				err := tr.Sent(next, now)
				switch {
				case closed:
					require.ErrorIs(t, err, retransmit.ErrStopped)
				case next-head >= uint64(window):
					require.ErrorIs(t, err, retransmit.ErrWindowFull)
				default:
					require.NoError(t, err)
					acked[next] = false
					next++
				}
			case 1:
				seq := head + uint64(r.u8()%20)
				want := !closed && seq < next && !acked[seq]
				require.Equal(t, want, tr.Acked(seq, now))
				if want {
					acked[seq] = true
				}
			case 2:
				seq := head + uint64(r.u8()%20) - 2
				want := 0
				if !closed && seq >= head && seq < next {
					for s := head; s <= seq; s++ {
						if !acked[s] {
							acked[s] = true
							want++
						}
					}
				}
				require.Equal(t, want, tr.AckedThrough(seq, now))
			case 3:
				events = events[:0]
				clk.Advance(time.Duration(r.u8()) * 50 * time.Millisecond)
				for _, ev := range events {
					require.False(t, closed, "event after give-up")
					if ev.giveUp {
						closed = true
						continue
					}
					oldest := head
					for acked[oldest] && oldest < next {
						oldest++
					}
					require.Equal(t, oldest, ev.seq, "retransmitted a message that is not the oldest outstanding")
					retx[ev.seq]++
					require.Equal(t, retx[ev.seq], ev.attempt)
				}
			}
			for head < next && acked[head] {
				head++
			}
			outstanding := 0
			for s := head; s < next; s++ {
				if !acked[s] {
					outstanding++
				}
			}
			wantNext := next // the seq the next Sent must carry; 1 before the first
			if len(acked) == 0 {
				wantNext = 1
			}
			require.Equal(t, wantNext, tr.Next())
			st := tr.Stats()
			require.Equal(t, closed, st.Stopped)
			if !closed {
				require.Equal(t, outstanding, st.Outstanding)
				require.Equal(t, outstanding > 0, w.Len() == 1, "timer armed iff something is outstanding")
			} else {
				require.Zero(t, w.Len())
			}
		}
	})
}
