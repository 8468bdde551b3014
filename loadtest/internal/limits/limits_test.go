package limits

import (
	"os"
	"strings"
	"testing"

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
