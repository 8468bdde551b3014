package promtext

import (
	"math"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/echo_metrics.txt is a real scrape of cmd/echo's /metrics
// (`go run ./cmd/echo -proto framed -metrics 127.0.0.1:9800`, curl
// http://127.0.0.1:9800/metrics) taken while the harness held 100
// connections open on it.
func TestParse_EchoSample(t *testing.T) {
	f, err := os.Open("testdata/echo_metrics.txt")
	require.NoError(t, err)
	defer f.Close()
	got, err := Parse(f, "netwheel_connections_open", "netwheel_timers_pending", "process_open_fds", "go_goroutines",
		"go_info", "process_start_time_seconds", "netwheel_connections_closed_total", "no_such_metric")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{
		"netwheel_connections_open":         100,
		"netwheel_timers_pending":           101,
		"process_open_fds":                  118,
		"go_goroutines":                     17,
		"go_info":                           1,                 // labelled: go_info{version="go1.26..."} 1
		"process_start_time_seconds":        1.79530734319e+09, // exponent notation
		"netwheel_connections_closed_total": 0,                 // 16 series, one per reason, summed
	}, got, "no_such_metric is absent, not zero")
}

func TestParse_Lines(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    map[string]float64
		wantErr string
	}{
		{name: "plain", text: "m 3\n", want: map[string]float64{"m": 3}},
		{name: "comments, blank lines and indentation",
			text: "# HELP m Help with m 9 in it.\n# TYPE m gauge\n\n   \n  m 4\n# EOF\n", want: map[string]float64{"m": 4}},
		{name: "series summed over label sets",
			text: "m{loop=\"0\"} 2\nm{loop=\"1\"} 5\n", want: map[string]float64{"m": 7}},
		{name: "closing brace, comma and escaped quote inside a label value",
			text: `m{a="x}, y",b="say \"}\" \\",c="line\nbreak",} 6` + "\n", want: map[string]float64{"m": 6}},
		{name: "timestamp ignored", text: "m 8 1712345678901\n", want: map[string]float64{"m": 8}},
		{name: "exemplar ignored", text: "m{le=\"1\"} 8 # {trace_id=\"a#b\"} 0.5 1712345678.9\n", want: map[string]float64{"m": 8}},
		{name: "float forms", text: "m 1.5e+03\n", want: map[string]float64{"m": 1500}},
		{name: "CRLF line ends", text: "m 2\r\nn 3\r\n", want: map[string]float64{"m": 2}},
		{name: "a longer name sharing the prefix is another metric",
			text: "m_total 9\nm_bucket{le=\"1\"} 9\nm 1\n", want: map[string]float64{"m": 1}},
		{name: "absent metric is absent", text: "other 1\n", want: map[string]float64{}},
		{name: "malformed line of another metric is skipped", text: "other{a=\"b\" oops\nm 1\n", want: map[string]float64{"m": 1}},
		{name: "no last newline", text: "m 5", want: map[string]float64{"m": 5}},
		{name: "bad value", text: "# TYPE m gauge\nm seventeen\n", wantErr: "line 2"},
		{name: "no value", text: "m\n", wantErr: "want a value"},
		{name: "label set not closed", text: "m{a=\"}\" 1\n", wantErr: "not closed"},
		{name: "extra field", text: "m 1 2 3\n", wantErr: "at most a timestamp"},
		{name: "bad timestamp", text: "m 1 soon\n", wantErr: "timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.text), "m")
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrSyntax)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParse_SpecialValues(t *testing.T) {
	got, err := Parse(strings.NewReader("a NaN\nb +Inf\nc -Inf\n"), "a", "b", "c")
	require.NoError(t, err)
	assert.True(t, math.IsNaN(got["a"]))
	assert.True(t, math.IsInf(got["b"], 1))
	assert.True(t, math.IsInf(got["c"], -1))
}

func TestParse_ReadErrorAndLongLine(t *testing.T) {
	_, err := Parse(iotest.ErrReader(os.ErrDeadlineExceeded), "m")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.NotErrorIs(t, err, ErrSyntax)
	_, err = Parse(strings.NewReader("m{a=\""+strings.Repeat("x", maxLine)+"\"} 1\n"), "m")
	require.Error(t, err, "a line over the bound is refused, not read without end")
}
