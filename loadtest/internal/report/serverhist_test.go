package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// delay returns a close-delay histogram with netserver's first bounds
// (0.5ms, 1ms, 2.5ms, 5ms, seconds) and the given cumulative counts,
// count and sum.
func delay(counts []uint64, count uint64, sum float64) *ServerHistogram {
	return &ServerHistogram{Metric: "netwheel_timeout_close_delay_seconds", Bounds: []float64{0.0005, 0.001, 0.0025, 0.005}, Counts: counts, Count: count, Sum: sum}
}

func TestServerHistogram_Quantile(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name   string
		h      *ServerHistogram
		q      float64
		want   float64
		wantOK bool
	}{
		{name: "empty", h: delay([]uint64{0, 0, 0, 0}, 0, 0), q: 0.5},
		{name: "all in one bucket: every quantile is its bound", h: delay([]uint64{0, 10, 10, 10}, 10, 0.008), q: 0.5, want: 0.001, wantOK: true},
		{name: "max of one bucket", h: delay([]uint64{0, 10, 10, 10}, 10, 0.008), q: 1, want: 0.001, wantOK: true},
		{name: "q 0 is the lowest observation's bucket", h: delay([]uint64{0, 10, 10, 10}, 10, 0.008), q: 0, want: 0.001, wantOK: true},
		// 100 observations: 50 <= 0.5ms, 40 in (0.5ms, 1ms], 9 in (1ms, 2.5ms], 1 in (2.5ms, 5ms].
		{name: "p50: rank 50 is the last of the first bucket", h: delay([]uint64{50, 90, 99, 100}, 100, 0.1), q: 0.5, want: 0.0005, wantOK: true},
		{name: "p51: rank 51 is in the second", h: delay([]uint64{50, 90, 99, 100}, 100, 0.1), q: 0.51, want: 0.001, wantOK: true},
		{name: "p90", h: delay([]uint64{50, 90, 99, 100}, 100, 0.1), q: 0.9, want: 0.001, wantOK: true},
		{name: "p99", h: delay([]uint64{50, 90, 99, 100}, 100, 0.1), q: 0.99, want: 0.0025, wantOK: true},
		{name: "p99.9 rounds the rank up to the last", h: delay([]uint64{50, 90, 99, 100}, 100, 0.1), q: 0.999, want: 0.005, wantOK: true},
		{name: "max", h: delay([]uint64{50, 90, 99, 100}, 100, 0.1), q: 1, want: 0.005, wantOK: true},
		{name: "q above 1 clamps to the max", h: delay([]uint64{50, 90, 99, 100}, 100, 0.1), q: 7, want: 0.005, wantOK: true},
		{name: "empty buckets skipped", h: delay([]uint64{0, 0, 0, 3}, 3, 0.012), q: 0.01, want: 0.005, wantOK: true},
		{name: "above the last bound: +Inf", h: delay([]uint64{1, 1, 1, 1}, 2, 2), q: 1, want: inf, wantOK: true},
		{name: "median above the last bound", h: delay([]uint64{1, 1, 1, 1}, 3, 2), q: 0.5, want: inf, wantOK: true},
		{name: "only the +Inf bucket", h: &ServerHistogram{Count: 4, Sum: 1}, q: 0.5, want: inf, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.h.Check())
			got, ok := tt.h.Quantile(tt.q)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestServerHistogram_Check(t *testing.T) {
	tests := []struct {
		name string
		h    *ServerHistogram
		want string // "" : well formed
	}{
		{name: "ok", h: delay([]uint64{1, 2, 2, 3}, 4, 1)},
		{name: "lengths", h: delay([]uint64{1, 2, 2}, 4, 1), want: "4 bounds but 3 counts"},
		{name: "falling counts", h: delay([]uint64{2, 1, 2, 3}, 4, 1), want: "not cumulative"},
		{name: "bucket above count", h: delay([]uint64{1, 2, 2, 5}, 4, 1), want: "not cumulative"},
		{name: "bounds not rising", h: &ServerHistogram{Bounds: []float64{1, 1}, Counts: []uint64{0, 0}}, want: "rising"},
		{name: "infinite bound", h: &ServerHistogram{Bounds: []float64{1, math.Inf(1)}, Counts: []uint64{0, 0}}, want: "finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Check()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrServerHistogram)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestServerHistogram_Sub(t *testing.T) {
	before := delay([]uint64{5, 8, 9, 9}, 10, 0.5)
	after := delay([]uint64{15, 30, 39, 40}, 42, 0.75)
	d, err := after.Sub(before)
	require.NoError(t, err)
	assert.Equal(t, delay([]uint64{10, 22, 30, 31}, 32, 0.25), d)
	assert.Equal(t, []uint64{15, 30, 39, 40}, after.Counts, "inputs untouched")
	d.Counts[0] = 99
	assert.Equal(t, uint64(15), after.Counts[0], "the result shares nothing with the input")
	same, err := after.Sub(after)
	require.NoError(t, err)
	assert.Zero(t, same.Count, "no close between the readings")

	_, err = before.Sub(after)
	assert.ErrorIs(t, err, ErrServerHistogram)
	assert.ErrorContains(t, err, "restart")
	_, err = delay([]uint64{1, 8, 9, 9}, 10, 0.5).Sub(before)
	assert.ErrorContains(t, err, "le=0.0005 fell from 5 to 1", "a bucket fell though the count did not")
	other := after.clone()
	other.Bounds[3] = 0.006
	_, err = other.Sub(before)
	assert.ErrorContains(t, err, "buckets changed")
}

// withDelay returns a one-shard result of server kind server at target
// with close delay h.
func withDelay(name, server, target string, h *ServerHistogram) *Result {
	r := shard(name, 10, 1e6)
	r.Config.Server, r.Config.Target, r.CloseDelay = server, target, h
	return r
}

func TestMerge_CloseDelay(t *testing.T) {
	a := delay([]uint64{1, 2, 3, 4}, 4, 0.01)
	b := delay([]uint64{0, 5, 5, 6}, 7, 2)
	otherBounds := &ServerHistogram{Metric: "netwheel_timeout_close_delay_seconds", Bounds: []float64{0.001}, Counts: []uint64{1}, Count: 1}
	tests := []struct {
		name     string
		rs       []*Result
		want     *ServerHistogram
		wantNote string
	}{
		{name: "embedded shards add up bucket-wise",
			rs:   []*Result{withDelay("1/2", "netwheel", "embedded 127.0.0.1:1", a), withDelay("2/2", "netwheel", "embedded 127.0.0.1:2", b)},
			want: delay([]uint64{1, 7, 8, 10}, 11, 2.01)},
		{name: "external shards at different servers add up",
			rs:   []*Result{withDelay("1/2", "external", "10.0.0.1:9000", a), withDelay("2/2", "external", "10.0.0.2:9000", b)},
			want: delay([]uint64{1, 7, 8, 10}, 11, 2.01)},
		{name: "one result is kept", rs: []*Result{withDelay("1/1", "netwheel", "embedded", a)}, want: a},
		{name: "none has it: nothing, no note", rs: []*Result{withDelay("1/2", "gnet", "embedded", nil), withDelay("2/2", "gnet", "embedded", nil)}},
		{name: "other bounds",
			rs:       []*Result{withDelay("1/2", "netwheel", "embedded", a), withDelay("2/2", "netwheel", "embedded", otherBounds)},
			wantNote: "result 2 has other buckets"},
		{name: "one lacks it",
			rs:       []*Result{withDelay("1/2", "netwheel", "embedded", a), withDelay("2/2", "netwheel", "embedded", nil)},
			wantNote: "only 1 of 2 results have it"},
		{name: "two shards read one external server",
			rs:       []*Result{withDelay("1/2", "external", "10.0.0.1:9000", a), withDelay("2/2", "external", "10.0.0.1:9000", b)},
			wantNote: "results 1 and 2 read the same server (10.0.0.1:9000)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Merge(tt.rs...)
			require.NoError(t, err)
			if tt.want != nil {
				require.NotNil(t, m.CloseDelay)
				assert.Equal(t, tt.want.Counts, m.CloseDelay.Counts)
				assert.Equal(t, tt.want.Count, m.CloseDelay.Count)
				assert.InDelta(t, tt.want.Sum, m.CloseDelay.Sum, 1e-12)
				if len(tt.rs) > 1 {
					assert.Contains(t, strings.Join(m.Notes, "\n"), "but for the server's own close delay, added up")
				}
			} else {
				assert.Nil(t, m.CloseDelay)
			}
			notes := strings.Join(m.Notes, "\n")
			if tt.wantNote != "" {
				assert.Contains(t, notes, tt.wantNote)
			} else {
				assert.NotContains(t, notes, "server's own close delay:")
			}
		})
	}
	assert.Equal(t, []uint64{1, 2, 3, 4}, a.Counts, "inputs untouched")
	assert.Equal(t, uint64(4), a.Count)
}

func TestText_CloseDelay(t *testing.T) {
	idleScenario := func() *Scenario {
		s := NewScenario("idle", expectOf("idle"))
		s.Add(ConnResult{Expect: "idle", End: "idle", ExpectedAt: t0, ClosedAt: t0.Add(time.Millisecond)}, to, true)
		return s
	}
	tests := []struct {
		name      string
		scenarios []*Scenario
		h         *ServerHistogram
		want      string
		after     string // the line it follows
	}{
		{name: "under the idle close errors", scenarios: []*Scenario{idleScenario()}, h: delay([]uint64{50, 90, 99, 100}, 100, 0.08),
			want:  "\n  server's own close delay (from its deadline to its close call, netwheel_timeout_close_delay_seconds): 100 timeout closes, p50 <= 500µs, p99 <= 2.5ms, max <= 5ms, mean 800µs\n",
			after: "close error (observed - expected)"},
		{name: "other timer scenarios: says so", scenarios: []*Scenario{idleScenario(), func() *Scenario {
			s := NewScenario("keepalive", expectOf("keepalive"))
			s.Add(ConnResult{Expect: "dead_peer", End: "dead_peer", ExpectedAt: t0, ClosedAt: t0}, to, true)
			return s
		}()}, h: delay([]uint64{1, 2, 2, 2}, 3, 3), want: "3 timeout closes of every scenario, p50 <= 1ms, p99 > 5ms, max > 5ms, mean 1.00s"},
		{name: "no idle scenario: after the scenarios", scenarios: []*Scenario{NewScenario("echo", expectOf("echo"))}, h: delay([]uint64{0, 0, 0, 0}, 0, 0),
			want: "\n\nserver's own close delay (from its deadline to its close call, netwheel_timeout_close_delay_seconds): no timeout closes\n", after: "[echo]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Result{Version: Version, Start: t0, End: t0.Add(time.Second), Scenarios: tt.scenarios, CloseDelay: tt.h}
			for _, s := range tt.scenarios {
				r.Config.Scenarios = append(r.Config.Scenarios, s.Name)
			}
			var b bytes.Buffer
			Text(&b, r, r.Judge())
			out := b.String()
			require.Equal(t, 1, strings.Count(out, "server's own close delay"), out)
			assert.Contains(t, out, tt.want)
			if tt.after != "" {
				assert.Less(t, strings.Index(out, tt.after), strings.Index(out, "server's own close delay"), out)
			}

			var js bytes.Buffer
			require.NoError(t, JSON(&js, r, r.Judge()))
			got, err := ReadJSON(&js)
			require.NoError(t, err)
			assert.Equal(t, tt.h, got.CloseDelay, "JSON round trip")
		})
	}
	var none bytes.Buffer
	nr := &Result{Version: Version, Scenarios: []*Scenario{idleScenario()}}
	Text(&none, nr, nr.Judge())
	assert.NotContains(t, none.String(), "close delay", "a server without the histogram: no line")

	_, err := ReadJSON(strings.NewReader(`{"version":2,"close_delay":{"metric":"m","bounds":[1,2],"counts":[3]}}`))
	assert.ErrorIs(t, err, ErrServerHistogram, "a malformed histogram in a result file")
}
