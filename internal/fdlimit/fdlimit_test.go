package fdlimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMaxConns(t *testing.T) {
	tests := []struct {
		name      string
		openFiles uint64
		loops     int
		want      int
	}{
		{name: "unknown", openFiles: 0, loops: 1, want: 0},
		{name: "unlimited", openFiles: ^uint64(0), loops: 1, want: 0},
		{name: "beyond any fd table", openFiles: 1 << 32, loops: 1, want: 0},
		{name: "largest bounded", openFiles: 1<<31 - 1, loops: 1, want: 1<<31 - 1 - 67},
		{name: "systemd soft default", openFiles: 1024, loops: 1, want: 1024 - 64 - 3},
		{name: "loops count", openFiles: 1024, loops: 7, want: 1024 - 64 - 21},
		{name: "zero loops as one", openFiles: 1024, loops: 0, want: 1024 - 64 - 3},
		{name: "large", openFiles: 1 << 20, loops: 63, want: 1<<20 - 64 - 189},
		{name: "reserve exactly half", openFiles: 134, loops: 1, want: 67},
		{name: "reserve above half", openFiles: 133, loops: 1, want: 66},
		{name: "tiny", openFiles: 100, loops: 1, want: 50},
		{name: "one", openFiles: 1, loops: 1, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, MaxConns(tc.openFiles, tc.loops))
		})
	}
}
