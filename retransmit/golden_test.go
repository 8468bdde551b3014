package retransmit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/retransmit"
	"github.com/netwheel/netwheel/wheel"
)

// The golden file is written by testdata/rfc6298.py, an independent model of
// RFC 6298 in Python. These tests replay it against the package.

type goldenConfig struct {
	Initial int64  `json:"initial"`
	RTOMin  int64  `json:"rto_min"`
	RTOMax  int64  `json:"rto_max"`
	G       int64  `json:"g"`
	Variant string `json:"variant"`
	Tick    int64  `json:"tick"`
	MaxRetx int    `json:"max_retx"`
	GiveUp  int64  `json:"give_up"`
	Window  int    `json:"window"`
}

func (g goldenConfig) config(t *testing.T) retransmit.Config {
	c := retransmit.Config{
		InitialRTO:     time.Duration(g.Initial),
		MinRTO:         time.Duration(g.RTOMin),
		MaxRTO:         time.Duration(g.RTOMax),
		Granularity:    time.Duration(g.G),
		MaxRetransmits: g.MaxRetx,
		GiveUpAfter:    time.Duration(g.GiveUp),
		Window:         g.Window,
	}
	switch g.Variant {
	case "", "rfc6298":
	case "linux":
		c.Variant = retransmit.Linux
	default:
		t.Fatalf("unknown variant %q", g.Variant)
	}
	return c
}

type goldenEstState struct {
	SRTT     int64 `json:"srtt"`
	RTTVar   int64 `json:"rttvar"`
	RTO      int64 `json:"rto"`
	Latest   int64 `json:"latest"`
	Backoffs int   `json:"backoffs"`
}

type goldenAction struct {
	At      int64  `json:"at"`
	Kind    string `json:"kind"`
	Seq     uint64 `json:"seq"`
	Attempt int    `json:"attempt,omitempty"`
	Limit   string `json:"limit,omitempty"`
	Retx    int    `json:"retx,omitempty"`
	Unacked int64  `json:"unacked,omitempty"`
}

type golden struct {
	Estimator []struct {
		Name   string       `json:"name"`
		Config goldenConfig `json:"config"`
		Steps  []struct {
			Op   string         `json:"op"`
			RTT  int64          `json:"rtt"`
			OK   bool           `json:"ok"`
			Want goldenEstState `json:"want"`
		} `json:"steps"`
	} `json:"estimator"`
	Tracker []struct {
		Name   string       `json:"name"`
		Config goldenConfig `json:"config"`
		Steps  []struct {
			At      int64           `json:"at"`
			Event   string          `json:"event"`
			Seq     uint64          `json:"seq"`
			Attempt int             `json:"attempt"`
			Result  json.RawMessage `json:"result"`
			Actions []goldenAction  `json:"actions"`
			Stats   struct {
				SRTT        int64 `json:"srtt"`
				RTO         int64 `json:"rto"`
				Backoffs    int   `json:"backoffs"`
				Outstanding int   `json:"outstanding"`
				Closed      bool  `json:"closed"`
			} `json:"stats"`
		} `json:"steps"`
	} `json:"tracker"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	data, err := os.ReadFile("testdata/golden.json")
	require.NoError(t, err, "regenerate with python3 retransmit/testdata/rfc6298.py")
	var g golden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Estimator)
	require.NotEmpty(t, g.Tracker)
	return g
}

func TestEstimator_Golden(t *testing.T) {
	for _, c := range loadGolden(t).Estimator {
		t.Run(c.Name, func(t *testing.T) {
			e, err := retransmit.NewEstimator(c.Config.config(t))
			require.NoError(t, err)
			for i, s := range c.Steps {
				switch s.Op {
				case "sample":
					assert.Equal(t, s.OK, e.Sample(time.Duration(s.RTT)), "step %d", i)
				case "timeout":
					assert.Equal(t, time.Duration(s.Want.RTO), e.Backoff(), "step %d: Backoff result", i)
				default:
					t.Fatalf("unknown op %q", s.Op)
				}
				got := goldenEstState{
					SRTT: int64(e.SRTT()), RTTVar: int64(e.RTTVar()), RTO: int64(e.RTO()),
					Latest: int64(e.LatestRTT()), Backoffs: e.Backoffs(),
				}
				require.Equal(t, s.Want, got, "step %d (%s %v)", i, s.Op, time.Duration(s.RTT))
			}
		})
	}
}

// recorder collects a Tracker's handler calls as golden actions, timestamped
// by the manual clock.
type recorder struct {
	clk     *wheel.ManualClock
	actions []goldenAction
	samples []time.Duration
}

func (r *recorder) handlers() retransmit.Hooks {
	return retransmit.Hooks{
		Retransmit: func(seq uint64, attempt int) {
			r.actions = append(r.actions, goldenAction{At: int64(r.clk.Now()), Kind: "retransmit", Seq: seq, Attempt: attempt})
		},
		GiveUp: func(err error) {
			var g *retransmit.GiveUpError
			if !errors.As(err, &g) {
				r.actions = append(r.actions, goldenAction{Kind: "bad error: " + err.Error()})
				return
			}
			limit := "?"
			switch {
			case g.Limit == retransmit.ErrMaxRetransmits:
				limit = "max_retransmits"
			case g.Limit == retransmit.ErrUnackedTimeout:
				limit = "unacked_timeout"
			}
			r.actions = append(r.actions, goldenAction{At: int64(r.clk.Now()), Kind: "giveup", Seq: g.Seq,
				Limit: limit, Retx: g.Retransmits, Unacked: int64(g.Unacked)})
		},
		Sample: func(rtt time.Duration) { r.samples = append(r.samples, rtt) },
	}
}

func TestTracker_Golden(t *testing.T) {
	for _, c := range loadGolden(t).Tracker {
		t.Run(c.Name, func(t *testing.T) {
			clk := wheel.NewManualClock()
			opts := []wheel.Option{wheel.WithClock(clk)}
			if c.Config.Tick != 0 {
				opts = append(opts, wheel.WithTick(time.Duration(c.Config.Tick)))
			}
			w := wheel.New(opts...)
			defer w.Stop()
			rec := &recorder{clk: clk}
			tr, err := retransmit.NewTracker(w, c.Config.config(t), rec.handlers())
			require.NoError(t, err)
			for i, s := range c.Steps {
				at := time.Duration(s.At)
				rec.actions = nil
				clk.Advance(at - clk.Now())
				require.Equal(t, at, clk.Now())
				var got any
				switch s.Event {
				case "sent":
					got = sentResult(tr.Sent(s.Seq, at))
				case "ack":
					got = tr.Acked(s.Seq, at)
				case "ack_attempt":
					got = tr.AckedAttempt(s.Seq, s.Attempt, at)
				case "ack_through":
					got = tr.AckedThrough(s.Seq, at)
				case "advance":
					got = nil
				default:
					t.Fatalf("unknown event %q", s.Event)
				}
				name := fmt.Sprintf("step %d: %s(%d) at %v", i, s.Event, s.Seq, at)
				gotJSON, err := json.Marshal(got)
				require.NoError(t, err)
				assert.JSONEq(t, string(s.Result), string(gotJSON), name)
				require.Equal(t, s.Actions, nonNil(rec.actions), name)
				st := tr.Stats()
				assert.Equal(t, time.Duration(s.Stats.SRTT), st.SRTT, name)
				assert.Equal(t, time.Duration(s.Stats.RTO), st.RTO, name)
				assert.Equal(t, s.Stats.Backoffs, st.Backoffs, name)
				assert.Equal(t, s.Stats.Outstanding, st.Outstanding, name)
				assert.Equal(t, s.Stats.Closed, st.Stopped, name)
			}
			// Every sample the tracker took reached the Sample handler.
			assert.Equal(t, uint64(len(rec.samples)), tr.Stats().Samples)
		})
	}
}

func sentResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case err == retransmit.ErrWindowFull:
		return "window_full"
	case err == retransmit.ErrSequence:
		return "sequence"
	case err == retransmit.ErrStopped:
		return "closed"
	}
	return "unexpected: " + err.Error()
}

func nonNil(a []goldenAction) []goldenAction {
	if a == nil {
		return []goldenAction{}
	}
	return a
}
