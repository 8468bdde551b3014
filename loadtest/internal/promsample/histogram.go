package promsample

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/common/model"
)

// ErrHistogram is wrapped by the error ClassicHistogram returns for
// samples that do not make a histogram: a bucket without a numeric le
// label or given twice, no +Inf bucket, counts that fall as the bound
// grows or are not counts, a _count that is not the +Inf bucket's, series
// with different buckets.
var ErrHistogram = errors.New("promsample: malformed histogram")

// Histogram is a classic Prometheus histogram as exposed: how many
// observations fell at or below each of a fixed set of upper bounds.
type Histogram struct {
	// Bounds are the buckets' upper bounds (their le labels), ascending;
	// the last is +Inf.
	Bounds []float64
	// Counts[i] is the number of observations <= Bounds[i]: cumulative, so
	// it never falls, and the last is Count.
	Counts []float64
	Count  float64 // the _count sample: every observation
	Sum    float64 // the _sum sample: the observations added up
}

// ClassicHistogram returns the classic histogram called name out of v: its
// name_bucket{le="..."}, name_count and name_sum samples, whether or not
// the exposition declared its TYPE. A histogram exposed as several series,
// split by other labels, is added up bucket by bucket, as Sum adds up a
// metric's series; every series must then have the same buckets.
//
// ok is false, with a nil error, if v holds none of the histogram's
// samples: the caller decides what a missing metric means. Samples that do
// not make a histogram give an error wrapping ErrHistogram that names the
// series. Where the exposition declared the TYPE, expfmt has already read
// the counts as whole numbers, a missing _count or _sum as 0 and a missing
// +Inf bucket as the _count. Cost: O(len(v)) time, O(buckets x series)
// memory. Safe from any goroutine.
func ClassicHistogram(v model.Vector, name string) (h Histogram, ok bool, err error) {
	type series struct {
		buckets          map[float64]float64 // le -> cumulative count
		count, sum       float64
		hasCount, hasSum bool
	}
	all := map[string]*series{} // by the label set without the name and le
	bucket, count, sum := model.LabelValue(name+"_bucket"), model.LabelValue(name+"_count"), model.LabelValue(name+"_sum")
	for _, smp := range v {
		metric := smp.Metric[model.MetricNameLabel]
		if metric != bucket && metric != count && metric != sum {
			continue
		}
		labels := model.LabelSet(smp.Metric).Clone()
		delete(labels, model.MetricNameLabel)
		le, hasLE := labels[model.BucketLabel]
		delete(labels, model.BucketLabel)
		key := labels.String()
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: %s: %s", ErrHistogram, smp.Metric, fmt.Sprintf(format, a...))
		}
		if hasLE && metric != bucket {
			return Histogram{}, false, bad("le label on a _count or _sum sample")
		}
		s := all[key]
		if s == nil {
			s = &series{buckets: map[float64]float64{}}
			all[key] = s
		}
		val := float64(smp.Value)
		switch metric {
		case bucket:
			if !hasLE {
				return Histogram{}, false, bad("no le label")
			}
			b, err := strconv.ParseFloat(string(le), 64)
			if err != nil || math.IsNaN(b) {
				return Histogram{}, false, bad("le %q is not a number", le)
			}
			if _, dup := s.buckets[b]; dup {
				return Histogram{}, false, bad("bucket le=%q given twice", le)
			}
			if !isCount(val) {
				return Histogram{}, false, bad("bucket count %v is not a count", val)
			}
			s.buckets[b] = val
		case count:
			if s.hasCount {
				return Histogram{}, false, bad("given twice")
			}
			if !isCount(val) {
				return Histogram{}, false, bad("count %v is not a count", val)
			}
			s.count, s.hasCount = val, true
		case sum:
			if s.hasSum {
				return Histogram{}, false, bad("given twice")
			}
			s.sum, s.hasSum = val, true
		}
	}
	if len(all) == 0 {
		return Histogram{}, false, nil
	}
	for i, key := range slices.Sorted(maps.Keys(all)) { // a stable order for the sums
		s := all[key]
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: %s (series %s): %s", ErrHistogram, name, key, fmt.Sprintf(format, a...))
		}
		switch {
		case !s.hasCount:
			return Histogram{}, false, bad("no %s_count", name)
		case !s.hasSum:
			return Histogram{}, false, bad("no %s_sum", name)
		case len(s.buckets) == 0:
			return Histogram{}, false, bad("no buckets (a summary?)")
		}
		bounds := slices.Sorted(maps.Keys(s.buckets))
		if !math.IsInf(bounds[len(bounds)-1], 1) {
			return Histogram{}, false, bad("no +Inf bucket")
		}
		for j := 1; j < len(bounds); j++ {
			if lo, hi := s.buckets[bounds[j-1]], s.buckets[bounds[j]]; hi < lo {
				return Histogram{}, false, bad("bucket le=%g holds %g, fewer than le=%g's %g: not cumulative", bounds[j], hi, bounds[j-1], lo)
			}
		}
		if inf := s.buckets[math.Inf(1)]; inf != s.count {
			return Histogram{}, false, bad("+Inf bucket %g differs from _count %g", inf, s.count)
		}
		if i == 0 {
			h = Histogram{Bounds: bounds, Counts: make([]float64, len(bounds))}
		} else if !slices.Equal(bounds, h.Bounds) {
			return Histogram{}, false, bad("its buckets differ from another series' of the histogram")
		}
		for j, b := range bounds {
			h.Counts[j] += s.buckets[b]
		}
		h.Count += s.count
		h.Sum += s.sum
	}
	return h, true, nil
}

// isCount reports whether v can be a number of observations.
func isCount(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }
