package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// ErrServerHistogram is wrapped by the errors of ServerHistogram's methods.
var ErrServerHistogram = errors.New("report: server histogram")

// ServerHistogram is a histogram a server kept itself and exposed in
// Prometheus's classic form: cumulative counts of observations at fixed
// upper bounds, so its quantiles are known only to the bucket. The +Inf
// bucket is Count (JSON has no infinity).
type ServerHistogram struct {
	Metric string    `json:"metric"`
	Bounds []float64 `json:"bounds"` // finite upper bounds, seconds, ascending
	Counts []uint64  `json:"counts"` // Counts[i]: observations <= Bounds[i] (cumulative)
	Count  uint64    `json:"count"`  // every observation, those above the last bound too
	Sum    float64   `json:"sum"`    // seconds, the observations added up
}

// Check reports whether h is well formed: as many counts as bounds,
// bounds finite and rising, counts cumulative and at most Count.
func (h *ServerHistogram) Check() error {
	if len(h.Bounds) != len(h.Counts) {
		return fmt.Errorf("%w %s: %d bounds but %d counts", ErrServerHistogram, h.Metric, len(h.Bounds), len(h.Counts))
	}
	for i, b := range h.Bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) || i > 0 && b <= h.Bounds[i-1] {
			return fmt.Errorf("%w %s: bounds not finite and rising at %v", ErrServerHistogram, h.Metric, b)
		}
		if c := h.Counts[i]; c > h.Count || i > 0 && c < h.Counts[i-1] {
			return fmt.Errorf("%w %s: counts not cumulative at bound %v", ErrServerHistogram, h.Metric, b)
		}
	}
	return nil
}

// Quantile returns the upper bound, in seconds, of the bucket that holds
// the q-quantile: the observation of rank ceil(q*Count), at least 1; q is
// clamped to [0, 1], so 0 gives the lowest observation's bucket and 1 the
// highest's. The quantile lies at or below the returned bound and above
// the one before it. It returns +Inf if that observation is above the
// last bound, and false if h is empty. O(buckets).
func (h *ServerHistogram) Quantile(q float64) (float64, bool) {
	if h.Count == 0 {
		return 0, false
	}
	rank := uint64(math.Ceil(min(max(q, 0), 1) * float64(h.Count)))
	rank = min(max(rank, 1), h.Count)
	i, _ := slices.BinarySearch(h.Counts, rank) // first bucket holding >= rank observations
	if i == len(h.Bounds) {
		return math.Inf(1), true
	}
	return h.Bounds[i], true
}

// Mean returns the mean observation in seconds, exact (from Sum), or 0 if
// h is empty.
func (h *ServerHistogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// sameBuckets reports whether h and o are the same metric with the same
// bounds, so their counts can be added or subtracted bucket by bucket.
func (h *ServerHistogram) sameBuckets(o *ServerHistogram) bool {
	return h.Metric == o.Metric && slices.Equal(h.Bounds, o.Bounds)
}

// Sub returns what h holds beyond before: bucket-wise after minus before,
// when h and before are two readings of one server's histogram. It fails
// if the buckets differ or a count fell (the server restarted between the
// readings, or they were read from different servers). h and before are
// not modified.
func (h *ServerHistogram) Sub(before *ServerHistogram) (*ServerHistogram, error) {
	if !h.sameBuckets(before) {
		return nil, fmt.Errorf("%w %s: its buckets changed between the readings", ErrServerHistogram, h.Metric)
	}
	if h.Count < before.Count {
		return nil, fmt.Errorf("%w %s: its count fell from %d to %d (did the server restart?)", ErrServerHistogram, h.Metric, before.Count, h.Count)
	}
	out := &ServerHistogram{Metric: h.Metric, Bounds: slices.Clone(h.Bounds), Counts: make([]uint64, len(h.Counts)),
		Count: h.Count - before.Count, Sum: h.Sum - before.Sum}
	for i, c := range h.Counts {
		if c < before.Counts[i] {
			return nil, fmt.Errorf("%w %s: bucket le=%g fell from %d to %d (did the server restart?)", ErrServerHistogram, h.Metric, h.Bounds[i], before.Counts[i], c)
		}
		out.Counts[i] = c - before.Counts[i]
	}
	return out, nil
}

// add adds o's counts to h's, bucket by bucket; the caller checked
// sameBuckets.
func (h *ServerHistogram) add(o *ServerHistogram) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.Count += o.Count
	h.Sum += o.Sum
}

// clone returns a deep copy of h.
func (h *ServerHistogram) clone() *ServerHistogram {
	c := *h
	c.Bounds, c.Counts = slices.Clone(h.Bounds), slices.Clone(h.Counts)
	return &c
}

// mergeCloseDelay adds up the results' close-delay histograms. It gives
// nil and a note saying why when they cannot be added: some results lack
// one, their buckets differ, or two results read the same external server
// (each reading then counts the other run's closes that fell in its
// window).
func mergeCloseDelay(rs []*Result) (*ServerHistogram, string) {
	var out *ServerHistogram
	have := 0
	targets := map[string]int{}
	for i, r := range rs {
		h := r.CloseDelay
		if h == nil {
			continue
		}
		have++
		if r.Config.Server == "external" {
			if j, dup := targets[r.Config.Target]; dup {
				return nil, fmt.Sprintf("server's own close delay: not merged: results %d and %d read the same server (%s), whose figures overlap", j+1, i+1, r.Config.Target)
			}
			targets[r.Config.Target] = i
		}
		switch {
		case out == nil:
			out = h.clone()
		case !out.sameBuckets(h):
			return nil, fmt.Sprintf("server's own close delay: not merged: result %d has other buckets than the first", i+1)
		default:
			out.add(h)
		}
	}
	if have > 0 && have < len(rs) {
		return nil, fmt.Sprintf("server's own close delay: not merged: only %d of %d results have it", have, len(rs))
	}
	return out, ""
}

// bound formats a bucket bound in seconds as a duration: 250µs, 2.5ms, 1s.
func bound(s float64) string {
	return time.Duration(math.Round(s * 1e9)).String()
}

// quantileText says where h's q-quantile lies: "<= 2.5ms", or "> 1s" above
// the last bound.
func (h *ServerHistogram) quantileText(q float64) string {
	b, _ := h.Quantile(q)
	switch {
	case !math.IsInf(b, 1):
		return "<= " + bound(b)
	case len(h.Bounds) > 0:
		return "> " + bound(h.Bounds[len(h.Bounds)-1])
	}
	return "above every bound"
}

// closeDelayText is the report line of the server's own close delay.
func closeDelayText(h *ServerHistogram, what string) string {
	head := fmt.Sprintf("server's own close delay (from its deadline to its close call, %s): ", h.Metric)
	if h.Count == 0 {
		return head + "no " + what
	}
	return head + fmt.Sprintf("%d %s, p50 %s, p99 %s, max %s, mean %s", h.Count, what,
		h.quantileText(0.5), h.quantileText(0.99), h.quantileText(1), D(int64(h.Mean()*1e9)))
}
