package promtext

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrHistogram is wrapped by the error ParseHistogram returns for a
// histogram whose lines parse but do not make a histogram: no +Inf bucket,
// counts that fall as the bound grows, a _count that is not the +Inf
// bucket's, series with different buckets.
var ErrHistogram = errors.New("promtext: malformed histogram")

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

// ParseHistogram reads the text exposition from r and returns the classic
// histogram called name: its name_bucket{le="..."}, name_count and name_sum
// samples. The le label may stand anywhere in a bucket's label set. A
// histogram exposed as several series, split by other labels, is added up
// bucket by bucket, as Parse adds up a metric's series; every series must
// then have the same buckets.
//
// ok is false, with a nil error, if r holds none of the histogram's
// samples: the caller decides what a missing metric means. Lines of other
// metrics are not checked. A malformed line of the histogram (a bad value,
// an le missing or not a number, a bucket or a _count given twice) is an
// error wrapping ErrSyntax with its line number; a histogram without its
// +Inf bucket, _count or _sum, with counts falling as the bound grows, or
// with a _count other than its +Inf bucket's, is an error wrapping
// ErrHistogram. Cost: one pass over r, O(lines), and O(buckets x series)
// memory. Safe from any goroutine.
func ParseHistogram(r io.Reader, name string) (h Histogram, ok bool, err error) {
	type series struct {
		buckets             map[float64]float64 // le -> cumulative count
		count, sum          float64
		hasCount, hasSum    bool
		bucketLine, endLine int // a line of it, for errors
	}
	all := map[string]*series{} // by the label set without le
	var order []string          // the series in order of appearance
	err = samples(r, func(n int, metric, rest string) error {
		suffix, wanted := strings.CutPrefix(metric, name)
		if !wanted || (suffix != "_bucket" && suffix != "_count" && suffix != "_sum") {
			return nil
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: line %d (%s%s): %s", ErrSyntax, n, name, suffix, fmt.Sprintf(format, a...))
		}
		var labels []label
		if strings.HasPrefix(rest, "{") {
			var i int
			var err error
			if labels, i, err = parseLabels(rest); err != nil {
				return bad("%v", err)
			}
			rest = rest[i:]
		}
		v, err := valueOf(rest)
		if err != nil {
			return bad("%v", err)
		}
		le, key, err := splitLE(labels)
		if err != nil {
			return bad("%v", err)
		}
		if le != "" && suffix != "_bucket" {
			return bad("le label on a %s sample", suffix)
		}
		s := all[key]
		if s == nil {
			s = &series{buckets: map[float64]float64{}}
			all[key] = s
			order = append(order, key)
		}
		switch suffix {
		case "_bucket":
			if le == "" {
				return bad("no le label")
			}
			b, err := strconv.ParseFloat(le, 64)
			if err != nil || math.IsNaN(b) {
				return bad("le %q is not a number", le)
			}
			if _, dup := s.buckets[b]; dup {
				return bad("bucket le=%q given twice", le)
			}
			if !isCount(v) {
				return bad("bucket count %v is not a count", v)
			}
			s.buckets[b] = v
			s.bucketLine = n
		case "_count":
			if s.hasCount {
				return bad("given twice")
			}
			if !isCount(v) {
				return bad("count %v is not a count", v)
			}
			s.count, s.hasCount, s.endLine = v, true, n
		case "_sum":
			if s.hasSum {
				return bad("given twice")
			}
			s.sum, s.hasSum, s.endLine = v, true, n
		}
		return nil
	})
	if err != nil {
		return Histogram{}, false, err
	}
	if len(order) == 0 {
		return Histogram{}, false, nil
	}
	for i, key := range order {
		s := all[key]
		at := max(s.bucketLine, s.endLine)
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: %s (series ending line %d): %s", ErrHistogram, name, at, fmt.Sprintf(format, a...))
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

// label is one name="value" pair of a sample's label set.
type label struct{ name, value string }

// splitLE returns the value of the le label ("" if there is none) and a
// key naming the rest of the label set, the same whatever the labels'
// order. A label given twice is an error.
func splitLE(labels []label) (le, key string, err error) {
	rest := make([]string, 0, len(labels))
	seen := make(map[string]bool, len(labels))
	for _, l := range labels {
		if seen[l.name] {
			return "", "", fmt.Errorf("label %s given twice", l.name)
		}
		seen[l.name] = true
		if l.name == "le" {
			le = l.value
			continue
		}
		rest = append(rest, strconv.Quote(l.name)+"="+strconv.Quote(l.value))
	}
	slices.Sort(rest)
	return le, strings.Join(rest, ","), nil
}

// parseLabels reads the label set s starts with, {name="value",...}, with
// an optional trailing comma and blanks between the tokens, unescaping the
// values (\\, \", \n). It returns the labels and the index just past the
// closing '}'.
func parseLabels(s string) ([]label, int, error) {
	var out []label
	i := 1 // past '{'
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		skip()
		if i < len(s) && s[i] == '}' {
			return out, i + 1, nil
		}
		start := i
		for i < len(s) && isNameChar(s[i], i == start) {
			i++
		}
		if i == start {
			if i >= len(s) {
				return nil, 0, errors.New("label set not closed")
			}
			return nil, 0, fmt.Errorf("want a label name at %q", s[i:])
		}
		name := s[start:i]
		skip()
		if i >= len(s) || s[i] != '=' {
			return nil, 0, fmt.Errorf("want '=' after label %s", name)
		}
		i++
		skip()
		if i >= len(s) || s[i] != '"' {
			return nil, 0, fmt.Errorf("want a quoted value for label %s", name)
		}
		i++
		var v strings.Builder
		for {
			if i >= len(s) {
				return nil, 0, errors.New("label set not closed")
			}
			c := s[i]
			i++
			if c == '"' {
				break
			}
			if c == '\\' && i < len(s) {
				switch e := s[i]; e {
				case 'n':
					c = '\n'
				case '\\', '"':
					c = e
				default:
					return nil, 0, fmt.Errorf("bad escape \\%c in label %s", e, name)
				}
				i++
			}
			v.WriteByte(c)
		}
		out = append(out, label{name: name, value: v.String()})
		skip()
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		skip()
		if i >= len(s) {
			return nil, 0, errors.New("label set not closed")
		}
		if s[i] != '}' {
			return nil, 0, fmt.Errorf("want ',' or '}' after label %s", name)
		}
	}
}

// isNameChar reports whether c may stand in a label name, first says
// whether it is the name's first character.
func isNameChar(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}
