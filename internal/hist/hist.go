// Package hist is a log-linear histogram of int64 values (nanoseconds, in
// the load-test harness), in the manner of HDR histograms: values below 128
// are counted exactly, larger ones in buckets 1/128 of their power of two
// wide, so every quantile is within 0.8% of the true value. Negative values
// are counted in a mirror set of buckets, so signed quantities such as a reap
// error (observed minus expected close time) fit too.
//
// A Histogram is plain data with no synchronization: one goroutine owns it
// (callers batch samples and merge under their own lock). Record is O(1) and
// allocation-free once the bucket slice has grown to the largest value seen;
// the slice is at most 7296 counters (57 KiB).
package hist

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
)

const (
	subBits  = 7
	subCount = 1 << subBits // buckets per power of two, and the exact range
)

// Histogram counts int64 values. The zero value is an empty histogram ready
// to use.
type Histogram struct {
	pos, neg []uint64 // counts by bucket index of v, and of -v for v < 0
	n        uint64
	min, max int64
	sum      float64
}

// index returns the bucket of v >= 0.
func index(v uint64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - 1 // >= subBits
	shift := e - subBits
	return subCount + shift*subCount + int(v>>uint(shift)) - subCount
}

// bounds returns the smallest and largest value of bucket i (of v >= 0).
func bounds(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	shift := uint((i - subCount) / subCount)
	sub := uint64(i%subCount) + subCount
	lo = sub << shift
	return lo, lo + (1 << shift) - 1
}

// Record counts one value. O(1); allocates only to grow the buckets.
func (h *Histogram) Record(v int64) {
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if h.n == 0 || v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
	if v >= 0 {
		h.pos = add(h.pos, index(uint64(v)), 1)
	} else {
		h.neg = add(h.neg, index(uint64(-(v+1)))+1, 1) // bucket of -(v+1), shifted by one; no overflow at MinInt64
	}
}

func add(c []uint64, i int, k uint64) []uint64 {
	if i >= len(c) {
		n := max(2*len(c), i+1, 64)
		n = min(n, index(math.MaxUint64)+2) // +2: the negative side is shifted by one
		nc := make([]uint64, n)
		copy(nc, c)
		c = nc
	}
	c[i] += k
	return c
}

// Count reports how many values were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min reports the smallest value recorded, or 0 if none.
func (h *Histogram) Min() int64 { return h.min }

// Max reports the largest value recorded, or 0 if none.
func (h *Histogram) Max() int64 { return h.max }

// Mean reports the mean of the values recorded, or 0 if none.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value at quantile q in [0, 1] (q is clamped): the
// smallest recorded value v such that at least ceil(q*Count) values are <= v,
// up to the bucket's width (within 1/128 of v; exact below 128), and never
// outside [Min, Max]. It returns 0 for an empty histogram. O(buckets).
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	clamp := func(v int64) int64 { return min(max(v, h.min), h.max) }
	for i := len(h.neg) - 1; i >= 0; i-- {
		if seen += h.neg[i]; seen >= rank {
			lo, hi := bounds(i - 1)
			// bucket i-1 holds -(v+1) for v < 0, so v in [-(hi+1), -(lo+1)]
			return clamp(-int64((lo+hi)/2) - 1)
		}
	}
	for i, c := range h.pos {
		if seen += c; seen >= rank {
			lo, hi := bounds(i)
			return clamp(int64(lo + (hi-lo)/2))
		}
	}
	return h.max
}

// Each calls f for every non-empty bucket in increasing order of value, with
// the bucket's smallest and largest value and its count.
func (h *Histogram) Each(f func(lo, hi int64, count uint64)) {
	for i := len(h.neg) - 1; i >= 1; i-- {
		if h.neg[i] != 0 {
			lo, hi := bounds(i - 1)
			f(-int64(hi)-1, -int64(lo)-1, h.neg[i])
		}
	}
	for i, c := range h.pos {
		if c != 0 {
			lo, hi := bounds(i)
			f(int64(lo), int64(hi), c)
		}
	}
}

// Merge adds every value of o to h. O(buckets).
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.n == 0 || o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
	for _, side := range [2][2]*[]uint64{{&h.pos, &o.pos}, {&h.neg, &o.neg}} {
		for i, c := range *side[1] {
			if c != 0 {
				*side[0] = add(*side[0], i, c)
			}
		}
	}
}

// wire is the JSON form: sparse [bucket, count] pairs.
type wire struct {
	Count uint64      `json:"count"`
	Min   int64       `json:"min"`
	Max   int64       `json:"max"`
	Sum   float64     `json:"sum"`
	Pos   [][2]uint64 `json:"pos,omitempty"`
	Neg   [][2]uint64 `json:"neg,omitempty"`
}

func sparse(c []uint64) [][2]uint64 {
	var s [][2]uint64
	for i, v := range c {
		if v != 0 {
			s = append(s, [2]uint64{uint64(i), v})
		}
	}
	return s
}

// MarshalJSON writes the histogram with its non-empty buckets only.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire{Count: h.n, Min: h.min, Max: h.max, Sum: h.sum, Pos: sparse(h.pos), Neg: sparse(h.neg)})
}

// UnmarshalJSON reads what MarshalJSON wrote; it rejects bucket indexes out
// of range and counts that do not add up.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*h = Histogram{n: w.Count, min: w.Min, max: w.Max, sum: w.Sum}
	limit := uint64(index(math.MaxUint64))
	var total uint64
	for _, set := range []struct {
		in  [][2]uint64
		out *[]uint64
	}{{w.Pos, &h.pos}, {w.Neg, &h.neg}} {
		for _, p := range set.in {
			if p[0] > limit+1 {
				return fmt.Errorf("hist: bucket %d out of range", p[0])
			}
			*set.out = add(*set.out, int(p[0]), p[1])
			total += p[1]
		}
	}
	if total != w.Count {
		return fmt.Errorf("hist: buckets hold %d values, count says %d", total, w.Count)
	}
	return nil
}
