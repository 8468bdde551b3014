// Package promsample reads the figures the harness needs out of a
// Prometheus /metrics exposition: a few gauges and counters, to compare a
// server's before and after a run, and one classic histogram. The text
// format itself is parsed by github.com/prometheus/common/expfmt, the
// standard parser; this package only turns its samples into those figures.
//
// It reads the text format (version 0.0.4, what the harness asks for), not
// OpenMetrics or protobuf, and no native histograms. Use expfmt directly for
// anything else.
package promsample

import (
	"fmt"
	"io"
	"maps"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Decode reads the text exposition from r with expfmt's TextParser and
// returns its samples, histograms and summaries flattened into their
// _bucket, _count, _sum and quantile series as exposed. Metric and label
// names are checked as UTF-8 (model.UTF8Validation), which accepts every
// classic name. A malformed exposition is an error wrapping
// expfmt.ParseError, with the line number; a failing r is an error wrapping
// r's. Cost: one pass over r, O(samples) allocations. Safe from any
// goroutine.
func Decode(r io.Reader) (model.Vector, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("promsample: %w", err)
	}
	fams := make([]*dto.MetricFamily, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) { // a stable order
		fams = append(fams, byName[name])
	}
	v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, fams...)
	if err != nil {
		return nil, fmt.Errorf("promsample: %w", err)
	}
	return v, nil
}

// Sum returns the value of each metric in names that v holds. A metric
// exposed as several series (label sets) gets the sum of their values,
// which is what a count split by, say, event loop adds up to. Only series
// named exactly so count: a histogram's or summary's _count is its own
// name. Metrics absent from v are absent from the map: the caller decides
// what a missing metric means. Cost: O(len(v)). Safe from any goroutine.
func Sum(v model.Vector, names ...string) map[string]float64 {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := make(map[string]float64, len(names))
	for _, s := range v {
		if name := string(s.Metric[model.MetricNameLabel]); want[name] {
			out[name] += float64(s.Value)
		}
	}
	return out
}
