// Package promtext reads a few figures out of the Prometheus text
// exposition format (version 0.0.4, what a /metrics endpoint serves), enough
// for the harness to compare a server's gauges before and after a run and to
// read one of its histograms. It is not a general parser: it keeps only the
// metrics asked for, ignores HELP, TYPE and other comments, ignores
// timestamps and OpenMetrics exemplars, and does not check a metric's TYPE.
// Parse adds up a metric's series without reading their labels;
// ParseHistogram reads only the le label of a classic (bucketed) histogram
// and adds up the series that differ in other labels. Neither tells series
// apart in any other way, nor reads native histograms, summaries' quantiles
// or the protobuf format; use github.com/prometheus/common/expfmt for that.
package promtext

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by the error Parse returns for a malformed sample
// line of a wanted metric.
var ErrSyntax = errors.New("promtext: syntax error")

// maxLine bounds one line of the exposition; a longer one is an error.
const maxLine = 1 << 20

// Parse reads the text exposition from r and returns the value of each
// metric in names that it holds. A metric exposed as several series (label
// sets) gets the sum of their values, which is what a count split by, say,
// event loop adds up to. Metrics absent from r are absent from the map:
// the caller decides what a missing metric means. Lines of other metrics
// are not checked, so a malformed line elsewhere does not spoil the read;
// a malformed line of a wanted metric is an error wrapping ErrSyntax, with
// its line number. Cost: one pass over r, O(lines); it allocates the map
// and the scanner's buffer. Safe from any goroutine.
func Parse(r io.Reader, names ...string) (map[string]float64, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := make(map[string]float64, len(names))
	err := samples(r, func(n int, name, rest string) error {
		if !want[name] {
			return nil
		}
		v, err := sampleValue(rest)
		if err != nil {
			return fmt.Errorf("%w: line %d (%s): %v", ErrSyntax, n, name, err)
		}
		out[name] += v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// samples calls f with each sample line of the exposition in r: its line
// number, the metric name and what follows it (labels, value, timestamp).
// Blank lines and comments are skipped. It stops at f's first error, or a
// line longer than maxLine.
func samples(r io.Reader, f func(n int, name, rest string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimLeft(sc.Text(), " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ \t")
		if end < 0 {
			end = len(line)
		}
		if err := f(n, line[:end], line[end:]); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("promtext: reading: %w", err)
	}
	return nil
}

// sampleValue parses what follows a metric name: an optional label set,
// the value, an optional timestamp and an optional exemplar.
func sampleValue(rest string) (float64, error) {
	if strings.HasPrefix(rest, "{") {
		i, err := labelsEnd(rest)
		if err != nil {
			return 0, err
		}
		rest = rest[i:]
	}
	return valueOf(rest)
}

// valueOf parses what follows a sample's label set: the value, an optional
// integer timestamp, and an optional OpenMetrics exemplar ("# {labels}
// value"), which is dropped: no '#' can appear in a value or a timestamp.
func valueOf(rest string) (float64, error) {
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	f := strings.Fields(rest)
	if len(f) == 0 || len(f) > 2 {
		return 0, fmt.Errorf("want a value and at most a timestamp, got %q", rest)
	}
	if len(f) == 2 {
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			return 0, fmt.Errorf("timestamp %q is not an integer", f[1])
		}
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not a number", f[0])
	}
	return v, nil
}

// labelsEnd returns the index just past the '}' that closes the label set
// s starts with, skipping quoted label values and their escapes (\\, \",
// \n), so a '}' or ',' inside a value does not end it.
func labelsEnd(s string) (int, error) {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++ // the escaped character
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i + 1, nil
		}
	}
	return 0, errors.New("label set not closed")
}
