package sources

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCounter_MapShrinksWithItsSources: a shard whose sources fall to an
// eighth of its peak gets a new map sized to what is left, so that the
// memory of a flood of sources gone is given back; a small map is kept.
func TestCounter_MapShrinksWithItsSources(t *testing.T) {
	c, err := New(1, 32, 64)
	require.NoError(t, err)
	const n = 64 * 200 // about 200 a shard
	keys := make([]netip.Addr, n)
	for i := range keys {
		keys[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		require.True(t, c.Acquire(keys[i]))
	}
	peaks := 0
	for i := range c.shards {
		peaks += c.shards[i].peak
	}
	assert.Equal(t, n, peaks, "each shard's peak is its sources")
	for _, k := range keys[:n-64] {
		c.Release(k)
	}
	rebuilt := 0
	for i := range c.shards {
		s := &c.shards[i]
		if s.peak < shrinkFloor {
			rebuilt++
			assert.LessOrEqual(t, len(s.m), s.peak, "a rebuilt map's peak is what it held then")
		}
	}
	assert.Equal(t, numShards, rebuilt, "every shard fell below an eighth of its peak and was rebuilt")
	assert.Equal(t, 64, c.Sources())
}
