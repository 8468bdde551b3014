package lag

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		busy, steal time.Duration
		cpus        int
		wantErr     bool
	}{
		{name: "two cpus with guests",
			text: "cpu  100 20 30 1000 5 1 2 7 50 0\ncpu0 50 10 15 500 2 1 1 3 25 0\ncpu1 50 10 15 500 3 0 1 4 25 0\nintr 1 2 3\nctxt 99\n",
			busy: 153 * 10 * time.Millisecond, steal: 70 * time.Millisecond, cpus: 2},
		{name: "old kernel, no guest fields",
			text: "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n",
			busy: 19 * 10 * time.Millisecond, steal: 80 * time.Millisecond, cpus: 1},
		{name: "no cpu line", text: "intr 1\n", wantErr: true},
		{name: "short cpu line", text: "cpu  1 2 3\n", wantErr: true},
		{name: "not a number", text: "cpu  1 2 x 4 5 6 7 8\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy, steal, cpus, err := parseProcStat(tt.text)
			if tt.wantErr {
				assert.ErrorIs(t, err, ErrProcStat)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.busy, busy)
			assert.Equal(t, tt.steal, steal)
			assert.Equal(t, tt.cpus, cpus)
		})
	}
}

func TestCPUOthers(t *testing.T) {
	a := CPU{Busy: 5 * time.Second, Steal: time.Second, Own: 2 * time.Second, CPUs: 2}
	b := CPU{Busy: 9 * time.Second, Steal: 3 * time.Second, Own: 3 * time.Second, CPUs: 2}
	d := b.Sub(a)
	assert.Equal(t, 3*time.Second, d.Others(), "busy 4s, of which 1s the process's own")
	assert.Equal(t, 2*time.Second, d.Steal)
	assert.Equal(t, time.Duration(0), CPU{Busy: time.Second, Own: 2 * time.Second}.Others(), "never negative")
}

// TestMonitor checks the figures are there and that Stop ends the
// monitor's goroutine; how late the wakes come is the machine's business.
func TestMonitor(t *testing.T) {
	before := goleak.IgnoreCurrent()
	m := Start(0)
	// Wait for wakes without sleeping on a timer of our own: spin on the
	// clock until 20 ms have passed.
	for t0 := time.Now(); time.Since(t0) < 20*time.Millisecond; {
		runtime.Gosched()
	}
	s := m.Stop()
	require.NotNil(t, s.Lag)
	assert.Positive(t, s.Lag.Count(), "some wakes in 20 ms")
	assert.GreaterOrEqual(t, s.Wall, 20*time.Millisecond)
	assert.LessOrEqual(t, s.Stalled, s.Wall, "stalls are within the run")
	if s.Err == "" {
		assert.Positive(t, s.CPUs)
	}
	// Stop waited for the goroutine's wg.Done; goleak waits for it to exit.
	goleak.VerifyNone(t, before) // nothing outlives Stop
}

// TestMonitor_ServerCPU: the server's CPU is counted apart; an unreadable
// server process is said, and leaves the CPU figures unjudged.
func TestMonitor_ServerCPU(t *testing.T) {
	if _, err := ReadCPU(); err != nil {
		t.Skipf("no CPU accounts here: %v", err)
	}
	s := Start(os.Getpid()).Stop() // this process as the "server"
	assert.Empty(t, s.Err)
	assert.GreaterOrEqual(t, s.ServerCPU, time.Duration(0))
	s = Start(1 << 30).Stop() // beyond pid_max
	assert.Contains(t, s.Err, "-server-pid")
}

// TestWaitRunning: the wait ends at once when done, never before d when
// not; the extension for a late poll is the machine's business.
func TestWaitRunning(t *testing.T) {
	calls := 0
	start := time.Now()
	assert.True(t, WaitRunning(time.Hour, time.Hour, func() bool { calls++; return calls == 3 }))
	assert.Equal(t, 3, calls)
	assert.Less(t, time.Since(start), time.Hour)

	start = time.Now()
	assert.False(t, WaitRunning(60*time.Millisecond, time.Hour, func() bool { return false }))
	assert.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond, "never early")

	start = time.Now()
	assert.False(t, WaitRunning(time.Hour, 50*time.Millisecond, func() bool { return false }), "bounded")
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
}
