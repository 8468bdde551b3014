package limits

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		rss, hwm int64
		ok       bool
	}{
		{name: "both lines", text: "Name:\techo\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\nThreads:\t4\n", rss: 10 << 20, hwm: 20 << 20, ok: true},
		{name: "no VmRSS (a zombie)", text: "Name:\techo\nState:\tZ (zombie)\n", ok: false},
		{name: "malformed value skipped", text: "VmRSS:\tlots kB\n", ok: false},
		{name: "empty", text: "", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rss, hwm, ok := parseStatus(strings.NewReader(tt.text))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.rss, rss)
			assert.Equal(t, tt.hwm, hwm)
		})
	}
}

func TestRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	self, err := RSS(0)
	require.NoError(t, err)
	assert.Positive(t, self)
	byPid, err := RSS(os.Getpid())
	require.NoError(t, err)
	assert.InDelta(t, self, byPid, 64<<20, "the same process, read twice")
	_, err = RSS(1 << 30) // beyond pid_max
	assert.Error(t, err)
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name         string
		text         string
		utime, stime uint64
		wantErr      bool
	}{
		{name: "plain", text: "21639 (echo) S 21634 21634 18626 0 -1 4194304 101 0 0 0 523 77 0 0 20 0 3 0 335949 3133440 389 18446744073709551615\n",
			utime: 523, stime: 77},
		{name: "name with spaces and parentheses", text: "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 12 34 0 0 20 0 1 0 1 1 1 1",
			utime: 12, stime: 34},
		{name: "truncated", text: "7 (echo) S 1 7 7 0 -1 0 0 0 0 0 12", wantErr: true},
		{name: "no command", text: "7 echo S 1", wantErr: true},
		{name: "not a number", text: "7 (echo) S 1 7 7 0 -1 0 0 0 0 0 x 34 0", wantErr: true},
		{name: "empty", text: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, s, err := parseStat(tt.text)
			if tt.wantErr {
				assert.ErrorIs(t, err, ErrStat)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.utime, u)
			assert.Equal(t, tt.stime, s)
		})
	}
	assert.Equal(t, 6*time.Second+10*time.Millisecond, ticks(601))
}

func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := ProcCPU(os.Getpid())
	require.NoError(t, err)
	// Burn CPU until the reading moves by 100 ms: it counts this thread's
	// time, at 10 ms resolution, and never more than the wall time passed
	// on every core.
	start := time.Now()
	var used time.Duration
	for used < 100*time.Millisecond && time.Since(start) < 10*time.Second {
		now, err := ProcCPU(0)
		require.NoError(t, err)
		used = now - before
	}
	require.GreaterOrEqual(t, used, 100*time.Millisecond, "busy for %s", time.Since(start))
	assert.LessOrEqual(t, used, time.Duration(runtime.NumCPU())*time.Since(start)+10*time.Millisecond)
	_, err = ProcCPU(1 << 30)
	assert.Error(t, err)
}
