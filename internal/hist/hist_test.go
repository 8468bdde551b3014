package hist

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exact is the brute-force reference: the smallest value with at least
// ceil(q*n) values at or below it.
func exact(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = max(rank, 1)
	return sorted[rank-1]
}

// within reports whether got is within the bucket precision of want.
func within(t *testing.T, want, got int64, msg string) {
	t.Helper()
	tol := float64(absInt(want))/subCount + 1
	assert.LessOrEqual(t, math.Abs(float64(got-want)), tol, "%s: want %d got %d", msg, want, got)
}

func absInt(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func TestHistogram_QuantileAgainstBruteForce(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand) int64
		n    int
	}{
		{name: "small exact", gen: func(r *rand.Rand) int64 { return r.Int64N(128) }, n: 1000},
		{name: "latency lognormal", gen: func(r *rand.Rand) int64 { return int64(math.Exp(r.NormFloat64()*1.5 + 12)) }, n: 20000},
		{name: "signed reap error", gen: func(r *rand.Rand) int64 { return r.Int64N(20_000_000) - 2_000_000 }, n: 20000},
		{name: "all negative", gen: func(r *rand.Rand) int64 { return -1 - r.Int64N(1e9) }, n: 5000},
		{name: "huge", gen: func(r *rand.Rand) int64 { return math.MaxInt64 - r.Int64N(1e12) }, n: 100},
		{name: "single", gen: func(r *rand.Rand) int64 { return 123456789 }, n: 1},
	}
	qs := []float64{0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var h Histogram
			vals := make([]int64, tt.n)
			for i := range vals {
				vals[i] = tt.gen(r)
				h.Record(vals[i])
			}
			slices.Sort(vals)
			require.Equal(t, uint64(tt.n), h.Count())
			assert.Equal(t, vals[0], h.Min())
			assert.Equal(t, vals[len(vals)-1], h.Max())
			for _, q := range qs {
				within(t, exact(vals, q), h.Quantile(q), "quantile")
			}
		})
	}
}

func TestHistogram_Empty(t *testing.T) {
	var h Histogram
	assert.Zero(t, h.Quantile(0.5))
	assert.Zero(t, h.Mean())
	assert.Zero(t, h.Count())
	h.Merge(nil)
	h.Merge(&Histogram{})
	assert.Zero(t, h.Count())
}

func TestHistogram_Bounds(t *testing.T) {
	// Every value lands in a bucket whose bounds hold it, buckets are
	// contiguous and at most 1/128 of their value wide.
	for i := 1; i < index(math.MaxUint64)+1; i++ {
		lo, hi := bounds(i)
		_, prevHi := bounds(i - 1)
		require.Equal(t, prevHi+1, lo, "bucket %d", i)
		require.Equal(t, i, index(lo))
		require.Equal(t, i, index(hi))
		require.LessOrEqual(t, float64(hi-lo), float64(lo)/subCount)
	}
}

func TestHistogram_MergeEqualsRecordAll(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var a, b, all Histogram
	for i := range 10000 {
		v := r.Int64N(1e10) - 1e8
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(&b)
	assert.Equal(t, all.Count(), a.Count())
	assert.Equal(t, all.Min(), a.Min())
	assert.Equal(t, all.Max(), a.Max())
	assert.InDelta(t, all.Mean(), a.Mean(), 1e-3*math.Abs(all.Mean()))
	for _, q := range []float64{0.01, 0.5, 0.99} {
		assert.Equal(t, all.Quantile(q), a.Quantile(q))
	}
}

func TestHistogram_JSONRoundTrip(t *testing.T) {
	var h Histogram
	for _, v := range []int64{-5_000_000, -3, 0, 7, 1000, 1e9, 1e9} {
		h.Record(v)
	}
	b, err := json.Marshal(&h)
	require.NoError(t, err)
	var g Histogram
	require.NoError(t, json.Unmarshal(b, &g))
	assert.Equal(t, h.Count(), g.Count())
	for _, q := range []float64{0, 0.3, 0.5, 0.9, 1} {
		assert.Equal(t, h.Quantile(q), g.Quantile(q), "q=%v", q)
	}
	assert.Error(t, json.Unmarshal([]byte(`{"count":3,"pos":[[1,1]]}`), &g), "counts must add up")
	assert.Error(t, json.Unmarshal([]byte(`{"count":1,"pos":[[99999999,1]]}`), &g), "bucket out of range")
}

func TestHistogram_RecordAllocs(t *testing.T) {
	var h Histogram
	h.Record(1 << 40)
	allocs := testing.AllocsPerRun(1000, func() { h.Record(12345) })
	assert.Zero(t, allocs)
}
