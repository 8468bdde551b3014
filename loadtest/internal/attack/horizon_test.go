package attack

import (
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// lateServer echoes and closes a connection idle for idle+late (never, for
// late < 0): a server whose idle timeout fires late.
func lateServer(t *testing.T, idle, late time.Duration) string {
	return serveEach(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			if late >= 0 {
				_ = c.SetReadDeadline(time.Now().Add(idle + late))
			}
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// TestRun_LateCloseMeasuredWithinTheHorizon: a close later than the slack
// is waited for and measured up to the horizon; past it the connection is
// closed by the harness, with no close seen. Lateness is asserted only
// from below: the clock's and the scheduler's delays only add to it.
func TestRun_LateCloseMeasuredWithinTheHorizon(t *testing.T) {
	const idle, slack = 200 * time.Millisecond, 50 * time.Millisecond
	tests := []struct {
		name        string
		late        time.Duration // the server's lateness; < 0: never closes
		horizon     time.Duration
		wantClosed  bool
		wantAtLeast time.Duration // observed - expected
		wantRun     time.Duration // the run lasts at least this
	}{
		{name: "late beyond the slack, within the horizon", late: 400 * time.Millisecond, horizon: 2 * time.Second,
			wantClosed: true, wantAtLeast: 400 * time.Millisecond, wantRun: idle + 400*time.Millisecond},
		{name: "never: the harness gives up at the horizon", late: -1, horizon: 300 * time.Millisecond, wantRun: idle + 300*time.Millisecond},
		{name: "no horizon: the slack, as before", late: 400 * time.Millisecond, wantRun: idle + slack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := lateServer(t, idle, tt.late)
			cfg := Config{Addr: addr, Proto: Raw, Scenarios: []string{scenario.Idle}, Conns: map[string]int{scenario.Idle: 2}, Size: 8,
				Timeouts: report.Timeouts{Idle: idle, Slack: slack}, CloseHorizon: tt.horizon}
			start := time.Now()
			_, results := runCollect(t, cfg, 2)
			elapsed := time.Since(start)
			for _, r := range results {
				require.Empty(t, r.Err, "the message was answered")
				require.False(t, r.ExpectedAt.IsZero())
				if !tt.wantClosed {
					assert.True(t, r.ClosedAt.IsZero(), "no close seen")
					assert.Equal(t, report.EndClient, r.End, "the harness closed it")
					continue
				}
				require.False(t, r.ClosedAt.IsZero(), "the late close was waited for")
				assert.GreaterOrEqual(t, r.ClosedAt.Sub(r.ExpectedAt), tt.wantAtLeast, "measured, not cut off at the slack")
			}
			assert.GreaterOrEqual(t, elapsed, tt.wantRun, "waited until the close or the horizon")
		})
	}
}
