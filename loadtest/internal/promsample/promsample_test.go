package promsample

import (
	"math"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/echo_metrics.txt is a real scrape of cmd/echo's /metrics
// (`go run ./cmd/echo -proto framed -metrics 127.0.0.1:9800`, curl
// http://127.0.0.1:9800/metrics) taken while the harness held 100
// connections open on it.
func TestSum_EchoSample(t *testing.T) {
	f, err := os.Open("testdata/echo_metrics.txt")
	require.NoError(t, err)
	defer f.Close()
	v, err := Decode(f)
	require.NoError(t, err)
	got := Sum(v, "netwheel_connections_open", "netwheel_timers_pending", "process_open_fds", "go_goroutines",
		"go_info", "process_start_time_seconds", "netwheel_connections_closed_total", "no_such_metric")
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

func TestDecode_Lines(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    map[string]float64 // Sum(v, "m")
		wantErr string             // "": none; else a ParseError containing it
	}{
		{name: "plain", text: "m 3\n", want: map[string]float64{"m": 3}},
		{name: "comments, blank lines and indentation",
			text: "# HELP m Help with m 9 in it.\n# TYPE m gauge\n\n   \n  m 4\n# EOF\n", want: map[string]float64{"m": 4}},
		{name: "series summed over label sets",
			text: "m{loop=\"0\"} 2\nm{loop=\"1\"} 5\n", want: map[string]float64{"m": 7}},
		{name: "closing brace, comma and escaped quote inside a label value",
			text: `m{a="x}, y",b="say \"}\" \\",c="line\nbreak",} 6` + "\n", want: map[string]float64{"m": 6}},
		{name: "timestamp ignored", text: "m 8 1712345678901\n", want: map[string]float64{"m": 8}},
		{name: "float forms", text: "m 1.5e+03\n", want: map[string]float64{"m": 1500}},
		{name: "a longer name sharing the prefix is another metric",
			text: "m_total 9\nm_bucket{le=\"1\"} 9\nm 1\n", want: map[string]float64{"m": 1}},
		{name: "a histogram's series are its own", text: "# TYPE m histogram\nm_bucket{le=\"+Inf\"} 1\nm_sum 1\nm_count 1\n",
			want: map[string]float64{}},
		{name: "absent metric is absent", text: "other 1\n", want: map[string]float64{}},

		// The standard parser is strict where promtext was lenient: the whole
		// exposition must be well formed, in the 0.0.4 text format.
		{name: "malformed line of another metric", text: "other{a=\"b\" oops\nm 1\n", wantErr: "line 1: unexpected end of label value"},
		{name: "exemplar (OpenMetrics only)", text: "m{le=\"1\"} 8 # {trace_id=\"a#b\"} 0.5 1712345678.9\n", wantErr: "timestamp"},
		{name: "CRLF line ends", text: "m 2\r\nn 3\r\n", wantErr: `got "2\r"`},
		{name: "no last newline", text: "m 5", wantErr: "unexpected end of input"},

		{name: "bad value", text: "# TYPE m gauge\nm seventeen\n", wantErr: `line 2: expected float as value, got "seventeen"`},
		{name: "no value", text: "m\n", wantErr: "expected float as value"},
		{name: "label set not closed", text: "m{a=\"}\" 1\n", wantErr: "unexpected end of label value"},
		{name: "extra field", text: "m 1 2 3\n", wantErr: "spurious string after timestamp"},
		{name: "bad timestamp", text: "m 1 soon\n", wantErr: "timestamp"},
		{name: "label twice", text: "m{a=\"1\",a=\"2\"} 1\n", wantErr: "duplicate label names"},
		{name: "bad escape", text: "m{a=\"\\t\"} 1\n", wantErr: "invalid escape sequence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Decode(strings.NewReader(tt.text))
			if tt.wantErr != "" {
				var perr expfmt.ParseError
				require.ErrorAs(t, err, &perr)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.True(t, strings.HasPrefix(err.Error(), "promsample: "), err.Error())
				assert.Nil(t, v)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, Sum(v, "m"))
		})
	}
}

func TestDecode_SpecialValues(t *testing.T) {
	v, err := Decode(strings.NewReader("a NaN\nb +Inf\nc -Inf\n"))
	require.NoError(t, err)
	got := Sum(v, "a", "b", "c")
	assert.True(t, math.IsNaN(got["a"]))
	assert.True(t, math.IsInf(got["b"], 1))
	assert.True(t, math.IsInf(got["c"], -1))
}

func TestDecode_ReadError(t *testing.T) {
	_, err := Decode(iotest.ErrReader(os.ErrDeadlineExceeded))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var perr expfmt.ParseError
	assert.NotErrorAs(t, err, &perr)
}
