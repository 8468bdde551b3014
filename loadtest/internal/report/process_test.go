package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "4096", want: 4096},
		{in: "512K", want: 512 << 10},
		{in: "4MiB", want: 4 << 20},
		{in: "4M", want: 4 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "64B", want: 64},
		{in: "", bad: true},
		{in: "-1", bad: true},
		{in: "4X", bad: true},
		{in: "9999999999G", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b ByteSize
			err := b.Set(tt.in)
			if tt.bad {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, int64(b))
		})
	}
	b := ByteSize(4 << 20)
	assert.Equal(t, "4MiB", b.String())
	b = 1000
	assert.Equal(t, "1000", b.String())
}
