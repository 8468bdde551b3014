package promsample

import (
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var inf = math.Inf(1)

// errParse stands in a test table for an expfmt.ParseError from Decode.
var errParse = errors.New("an expfmt.ParseError")

// readHistogram decodes r and returns its histogram called name.
func readHistogram(r io.Reader, name string) (Histogram, bool, error) {
	v, err := Decode(r)
	if err != nil {
		return Histogram{}, false, err
	}
	return ClassicHistogram(v, name)
}

// testdata/echo_idle_metrics.txt is a real scrape of cmd/echo's /metrics
// (`go run ./cmd/echo -proto framed -idle-timeout 300ms -metrics
// 127.0.0.1:9712`, then `go run ./loadtest -addr 127.0.0.1:9711 -proto
// framed -scenario idle -conns 20 -idle 300ms`, then curl) after its idle
// timeout had closed 20 connections.
func TestClassicHistogram_EchoSample(t *testing.T) {
	f, err := os.Open("testdata/echo_idle_metrics.txt")
	require.NoError(t, err)
	defer f.Close()
	h, ok, err := readHistogram(f, "netwheel_timeout_close_delay_seconds")
	require.NoError(t, err)
	require.True(t, ok)
	want := []float64{0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008,
		0.010, 0.0125, 0.015, 0.020, 0.025, 0.030, 0.040, 0.050, 0.075, 0.100, 0.150, 0.200, 0.300, 0.500, 1, inf}
	assert.Equal(t, want, h.Bounds)
	require.Len(t, h.Counts, len(want))
	assert.Equal(t, []float64{0, 0, 0, 0, 19, 20}, h.Counts[:6])
	assert.Equal(t, 20.0, h.Counts[len(h.Counts)-1])
	assert.Equal(t, 20.0, h.Count)
	assert.InDelta(t, 0.028167293, h.Sum, 1e-12)

	// The older sample has the other histograms but not this one.
	f2, err := os.Open("testdata/echo_metrics.txt")
	require.NoError(t, err)
	defer f2.Close()
	_, ok, err = readHistogram(f2, "netwheel_timeout_close_delay_seconds")
	require.NoError(t, err)
	assert.False(t, ok, "absent")
}

func TestClassicHistogram_Lines(t *testing.T) {
	const full = "h_bucket{le=\"0.1\"} 1\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 4\nh_sum 7.5\nh_count 4\n"
	tests := []struct {
		name    string
		text    string
		want    Histogram
		absent  bool
		wantErr error // ErrHistogram or errParse
		errText string
	}{
		{name: "plain", text: "# HELP h A help.\n# TYPE h histogram\n" + full,
			want: Histogram{Bounds: []float64{0.1, 1, inf}, Counts: []float64{1, 3, 4}, Count: 4, Sum: 7.5}},
		{name: "no TYPE: read from the series alike", text: full,
			want: Histogram{Bounds: []float64{0.1, 1, inf}, Counts: []float64{1, 3, 4}, Count: 4, Sum: 7.5}},
		{name: "TYPE declared: expfmt takes a missing +Inf bucket from _count",
			text: "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_sum 7.5\nh_count 4\n",
			want: Histogram{Bounds: []float64{1, inf}, Counts: []float64{3, 4}, Count: 4, Sum: 7.5}},
		{name: "buckets out of order, count before sum",
			text: "h_count 4\nh_bucket{le=\"+Inf\"} 4\nh_bucket{le=\"1\"} 3\nh_sum 7.5\nh_bucket{le=\"0.1\"} 1\n",
			want: Histogram{Bounds: []float64{0.1, 1, inf}, Counts: []float64{1, 3, 4}, Count: 4, Sum: 7.5}},
		{name: "only the +Inf bucket", text: "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",
			want: Histogram{Bounds: []float64{inf}, Counts: []float64{2}, Count: 2, Sum: 1}},
		{name: "le in other forms: exponent, Inf without sign, blanks, trailing comma",
			text: "h_bucket{ le = \"1e-1\" , } 1\nh_bucket{le=\"1.0\"} 3\nh_bucket{le=\"Inf\"} 4\nh_sum 7.5\nh_count 4\n",
			want: Histogram{Bounds: []float64{0.1, 1, inf}, Counts: []float64{1, 3, 4}, Count: 4, Sum: 7.5}},
		{name: "series split by another label, le first or last, summed bucket-wise",
			text: "h_bucket{loop=\"0\",le=\"1\"} 1\nh_bucket{le=\"+Inf\",loop=\"0\"} 2\nh_sum{loop=\"0\"} 1\nh_count{loop=\"0\"} 2\n" +
				"h_bucket{le=\"1\",loop=\"1\"} 5\nh_bucket{loop=\"1\",le=\"+Inf\"} 5\nh_sum{loop=\"1\"} 2\nh_count{loop=\"1\"} 5\n",
			want: Histogram{Bounds: []float64{1, inf}, Counts: []float64{6, 7}, Count: 7, Sum: 3}},
		{name: "series split by another label, TYPE declared",
			text: "# TYPE h histogram\nh_bucket{loop=\"0\",le=\"1\"} 1\nh_bucket{le=\"+Inf\",loop=\"0\"} 2\nh_sum{loop=\"0\"} 1\nh_count{loop=\"0\"} 2\n" +
				"h_bucket{le=\"1\",loop=\"1\"} 5\nh_bucket{loop=\"1\",le=\"+Inf\"} 5\nh_sum{loop=\"1\"} 2\nh_count{loop=\"1\"} 5\n",
			want: Histogram{Bounds: []float64{1, inf}, Counts: []float64{6, 7}, Count: 7, Sum: 3}},
		{name: "several labels in two orders are one series",
			text: "h_bucket{a=\"x\",b=\"y\",le=\"1\"} 1\nh_bucket{le=\"+Inf\",b=\"y\",a=\"x\"} 2\nh_sum{b=\"y\",a=\"x\"} 1\nh_count{a=\"x\",b=\"y\"} 2\n",
			want: Histogram{Bounds: []float64{1, inf}, Counts: []float64{1, 2}, Count: 2, Sum: 1}},
		{name: "escapes in other labels' values", text: "h_bucket{p=\"a\\\"}\\\\\",le=\"+Inf\"} 1\nh_sum{p=\"a\\\"}\\\\\"} 1\nh_count{p=\"a\\\"}\\\\\"} 1\n",
			want: Histogram{Bounds: []float64{inf}, Counts: []float64{1}, Count: 1, Sum: 1}},
		{name: "timestamps ignored",
			text: "h_bucket{le=\"1\"} 1 1712345678901\nh_bucket{le=\"+Inf\"} 1\nh_sum 0.5 1712345678901\nh_count 1\n",
			want: Histogram{Bounds: []float64{1, inf}, Counts: []float64{1, 1}, Count: 1, Sum: 0.5}},
		{name: "other metrics sharing the prefix are not read",
			text: "h 9\nh_total 9\nh_bucket_x{le=\"1\"} 9\nhh_bucket{le=\"1\"} 9\nh_created 1.7e9\n" + full,
			want: Histogram{Bounds: []float64{0.1, 1, inf}, Counts: []float64{1, 3, 4}, Count: 4, Sum: 7.5}},
		{name: "absent", text: "other 1\nh 3\n", absent: true},
		{name: "empty", text: "", absent: true},

		{name: "malformed line of another metric", text: "other_bucket{le=oops} x\n" + full, wantErr: errParse, errText: "line 1: expected '\"' at start of label value"},
		{name: "exemplar", text: "h_bucket{le=\"1\"} 1 1712345678901 # {trace_id=\"a\"} 0.5\n" + full, wantErr: errParse, errText: "spurious string after timestamp"},
		{name: "le not a number", text: "h_bucket{le=\"fast\"} 1\n" + full, wantErr: ErrHistogram, errText: `h_bucket{le="fast"}: le "fast" is not a number`},
		{name: "le not a number, TYPE declared", text: "# TYPE h histogram\nh_bucket{le=\"fast\"} 1\n" + full, wantErr: errParse,
			errText: `line 2: expected float as value for 'le' label, got "fast"`},
		{name: "le NaN", text: "h_bucket{le=\"NaN\"} 1\n" + full, wantErr: ErrHistogram, errText: "not a number"},
		{name: "le unquoted", text: "h_bucket{le=0.5} 1\n" + full, wantErr: errParse, errText: "start of label value"},
		{name: "no le", text: "h_bucket{loop=\"0\"} 1\n", wantErr: ErrHistogram, errText: "no le label"},
		{name: "le on the count", text: "h_count{le=\"1\"} 1\n", wantErr: ErrHistogram, errText: "le label on a _count"},
		{name: "bucket twice", text: full + "h_bucket{le=\"1.0\"} 3\n", wantErr: ErrHistogram, errText: `h_bucket{le="1.0"}: bucket le="1.0" given twice`},
		{name: "label twice", text: "h_bucket{le=\"1\",le=\"2\"} 1\n", wantErr: errParse, errText: "duplicate label names"},
		{name: "count twice", text: full + "h_count 4\n", wantErr: ErrHistogram, errText: "given twice"},
		{name: "sum twice", text: full + "h_sum 4\n", wantErr: ErrHistogram, errText: "given twice"},
		{name: "negative count", text: "h_bucket{le=\"+Inf\"} -1\n", wantErr: ErrHistogram, errText: "not a count"},
		{name: "NaN count", text: "h_count NaN\n", wantErr: ErrHistogram, errText: "not a count"},
		{name: "bad value", text: "h_bucket{le=\"1\"} many\n", wantErr: errParse, errText: "expected float as value"},
		{name: "label set not closed", text: "h_bucket{le=\"1\" 1\n", wantErr: errParse, errText: "unexpected end of label value"},
		{name: "value not closed", text: "h_bucket{le=\"1} 1\n", wantErr: errParse, errText: "unescaped new-line"},
		{name: "bad escape", text: "h_bucket{a=\"\\t\",le=\"1\"} 1\n", wantErr: errParse, errText: "invalid escape sequence"},

		{name: "no +Inf bucket", text: "h_bucket{le=\"0.1\"} 1\nh_bucket{le=\"1\"} 3\nh_sum 7.5\nh_count 3\n", wantErr: ErrHistogram, errText: "no +Inf bucket"},
		{name: "no count", text: "h_bucket{le=\"+Inf\"} 1\nh_sum 1\n", wantErr: ErrHistogram, errText: "no h_count"},
		{name: "no sum", text: "h_bucket{le=\"+Inf\"} 1\nh_count 1\n", wantErr: ErrHistogram, errText: "no h_sum"},
		{name: "no buckets: a summary", text: "h{quantile=\"0.5\"} 1\nh_sum 1\nh_count 1\n", wantErr: ErrHistogram, errText: "no buckets"},
		{name: "not cumulative", text: "h_bucket{le=\"0.1\"} 3\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n",
			wantErr: ErrHistogram, errText: "not cumulative"},
		{name: "count differs from +Inf", text: "h_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 4\n", wantErr: ErrHistogram, errText: "differs from _count"},
		{name: "count differs from +Inf, TYPE declared", text: "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 4\n",
			wantErr: ErrHistogram, errText: "differs from _count"},
		{name: "series with other buckets",
			text: "h_bucket{loop=\"0\",le=\"1\"} 1\nh_bucket{loop=\"0\",le=\"+Inf\"} 1\nh_sum{loop=\"0\"} 1\nh_count{loop=\"0\"} 1\n" +
				"h_bucket{loop=\"1\",le=\"2\"} 1\nh_bucket{loop=\"1\",le=\"+Inf\"} 1\nh_sum{loop=\"1\"} 1\nh_count{loop=\"1\"} 1\n",
			wantErr: ErrHistogram, errText: `(series {loop="1"}): its buckets differ from another series'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := readHistogram(strings.NewReader(tt.text), "h")
			if tt.wantErr != nil {
				if tt.wantErr == errParse {
					var perr expfmt.ParseError
					require.ErrorAs(t, err, &perr)
				} else {
					require.ErrorIs(t, err, tt.wantErr)
				}
				assert.Contains(t, err.Error(), tt.errText)
				assert.False(t, ok)
				return
			}
			require.NoError(t, err)
			require.Equal(t, !tt.absent, ok)
			if tt.absent {
				assert.Zero(t, got)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
