package baseline

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/loadtest/internal/promsample"
	"github.com/netwheel/netwheel/loadtest/internal/report"
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
func scrape(t *testing.T, s Server) (promsample.Histogram, int) {
	t.Helper()
	ms, ok := s.(interface{ MetricsHandler() http.Handler })
	require.True(t, ok, "the server serves no metrics")
	if ms.MetricsHandler() == nil {
		return promsample.Histogram{}, http.StatusNotFound
	}
	w := httptest.NewRecorder()
	ms.MetricsHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		return promsample.Histogram{}, w.Code
	}
	v, err := promsample.Decode(w.Body)
	require.NoError(t, err)
	h, found, err := promsample.ClassicHistogram(v, report.CloseDelayMetric)
	require.NoError(t, err)
	require.True(t, found, "no %s in the metrics", report.CloseDelayMetric)
	return h, w.Code
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
			require.Zero(t, h.Count)

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
			assert.Equal(t, 1.0, h.Count)
			assert.GreaterOrEqual(t, h.Sum, 0.0)
			assert.Less(t, h.Sum, 1.0)
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
