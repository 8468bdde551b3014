package baseline

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/netserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's shared worker pool (ants) keeps its goroutines for the life
		// of the process; they are not the servers'.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

// scrape reads the close-delay histogram a server serves.
func scrape(t *testing.T, s Server) (*dto.Histogram, int) {
	t.Helper()
	ms, ok := s.(interface{ MetricsHandler() http.Handler })
	require.True(t, ok, "the server serves no metrics")
	if ms.MetricsHandler() == nil {
		return nil, http.StatusNotFound
	}
	w := httptest.NewRecorder()
	ms.MetricsHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		return nil, w.Code
	}
	return closeDelayOf(t, w.Body), w.Code
}

// closeDelayOf parses a Prometheus text exposition and returns its
// close-delay histogram.
func closeDelayOf(t *testing.T, r io.Reader) *dto.Histogram {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	require.NoError(t, err)
	f := fams[CloseDelayMetric]
	require.NotNil(t, f, "no %s in the metrics", CloseDelayMetric)
	require.Len(t, f.GetMetric(), 1)
	h := f.GetMetric()[0].GetHistogram()
	require.NotNil(t, h, "%s is not a histogram", CloseDelayMetric)
	return h
}

// TestCloseDelayBucketsMatchNetserver checks that the baselines measure
// their close delay in the buckets netserver uses, so that the figures the
// harness reads from each (bucket bounds at the percentiles) compare.
func TestCloseDelayBucketsMatchNetserver(t *testing.T) {
	s, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0"}, netserver.Echo{})
	require.NoError(t, err)
	w := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, w.Code)
	var bounds []float64
	for _, b := range closeDelayOf(t, w.Body).GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	assert.Equal(t, append(slices.Clone(CloseDelayBuckets), math.Inf(1)), bounds, "the text exposition's +Inf bucket too")
}

// TestCloseDelay checks each timer baseline's own measure of its idle
// closes: one sample per close, from the exact deadline, so never negative
// and (on loopback, one connection) well under a second; and nothing served
// when not asked to measure.
func TestCloseDelay(t *testing.T) {
	const idle = 50 * time.Millisecond
	for _, kind := range []string{KindGnetAfterFunc, KindNetDeadline, KindNbio} {
		t.Run("server="+kind, func(t *testing.T) {
			s, err := Start(kind, "127.0.0.1:0", Options{Idle: idle, CloseDelay: true})
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				require.NoError(t, s.Shutdown(ctx))
			}()
			h, code := scrape(t, s)
			require.Equal(t, http.StatusOK, code)
			require.Zero(t, h.GetSampleCount())

			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			sent := time.Now() // the server resets its timer after this
			_, err = c.Write([]byte("x"))
			require.NoError(t, err)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
			buf := make([]byte, 1)
			_, err = io.ReadFull(c, buf)
			require.NoError(t, err, "echo")
			_, err = c.Read(buf)
			require.ErrorIs(t, err, io.EOF, "the idle close")
			require.GreaterOrEqual(t, time.Since(sent), idle, "closed before the idle timeout")

			require.Eventually(t, func() bool { return s.Stats().Closes["idle"] == 1 }, 2*time.Second, time.Millisecond)
			h, _ = scrape(t, s)
			assert.Equal(t, uint64(1), h.GetSampleCount())
			assert.GreaterOrEqual(t, h.GetSampleSum(), 0.0)
			assert.Less(t, h.GetSampleSum(), 1.0)
		})
	}
	t.Run("off", func(t *testing.T) {
		s, err := Start(KindNetDeadline, "127.0.0.1:0", Options{Idle: idle})
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
		_, code := scrape(t, s)
		assert.Equal(t, http.StatusNotFound, code)
	})
}
