package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestByteSize: -hostile-bytes and the limits' flags take plain counts and
// binary suffixes, and print themselves back in the largest whole unit.
func TestByteSize(t *testing.T) {
	good := map[string]int64{"4096": 4096, "512K": 512 << 10, "4MiB": 4 << 20, "4M": 4 << 20, "1GiB": 1 << 30, "64B": 64}
	for in, want := range good {
		var b ByteSize
		require.NoError(t, b.Set(in), in)
		assert.Equal(t, want, int64(b), in)
	}
	for _, in := range []string{"", "-1", "4X", "9999999999G"} {
		var b ByteSize
		assert.Error(t, b.Set(in), "%q is no byte count", in)
	}
	b := ByteSize(4 << 20)
	assert.Equal(t, "4MiB", b.String())
	b = 1000
	assert.Equal(t, "1000", b.String())
}

// TestMemoryBound_For: the connections that fill their output are counted
// by scenario; the others open at once get PerOtherConn; a flood that runs
// alone counts only if it has more; raw has no unacknowledged payload.
func TestMemoryBound_For(t *testing.T) {
	limits := MemoryBound{OutputLimit: 4 << 20, UnackedLimit: 1 << 20, Fixed: 32 << 20}
	b := limits.For(map[string]int{"echo": 100, "nonreader": 4, "splitter": 20, "connflood": 50}, 26, 0, true)
	assert.Equal(t, map[string]int{"nonreader": 4}, b.Filling)
	assert.Equal(t, 100+20+26, b.Other, "echo, splitters and churn; connflood runs alone, with fewer")
	assert.Equal(t, int64(4*(5<<20)+146*PerOtherConn+32<<20), b.Total())
	b = limits.For(map[string]int{"echo": 100, "sourceflood": 300}, 0, 10, false)
	assert.Zero(t, b.UnackedLimit, "raw: no acknowledgements")
	assert.Equal(t, 310, b.Other, "sourceflood and its neighbours, alone, outnumber the others")
}
