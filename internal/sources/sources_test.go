package sources_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/sources"
)

func TestNew_bounds(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		limit, v4Bits, v6Bits int
	}{
		{name: "limit 0", limit: 0, v4Bits: 32, v6Bits: 64},
		{name: "v4 /0", limit: 1, v4Bits: 0, v6Bits: 64},
		{name: "v4 /33", limit: 1, v4Bits: 33, v6Bits: 64},
		{name: "v6 /129", limit: 1, v4Bits: 32, v6Bits: 129},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sources.New(tt.limit, tt.v4Bits, tt.v6Bits)
			require.Error(t, err)
		})
	}
}

func TestCounter_Key(t *testing.T) {
	c, err := sources.New(1, 24, 64)
	require.NoError(t, err)
	for _, tt := range []struct{ name, in, want string }{
		{name: "ipv4 by /24", in: "192.0.2.77", want: "192.0.2.0"},
		{name: "4in6 is ipv4", in: "::ffff:192.0.2.77", want: "192.0.2.0"},
		{name: "ipv6 by /64", in: "2001:db8:1:2:aaaa:bbbb:cccc:dddd", want: "2001:db8:1:2::"},
		{name: "zone dropped", in: "fe80::1%eth0", want: "fe80::"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, netip.MustParseAddr(tt.want), c.Key(netip.MustParseAddr(tt.in)))
		})
	}
	full, err := sources.New(1, 32, 128)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("192.0.2.77"), full.Key(netip.MustParseAddr("192.0.2.77")))
	assert.Equal(t, netip.Addr{}, full.Key(netip.Addr{}))
}

func TestCounter_limitPerSource(t *testing.T) {
	c, err := sources.New(3, 32, 64)
	require.NoError(t, err)
	a := c.Key(netip.MustParseAddr("2001:db8::1"))
	b := c.Key(netip.MustParseAddr("2001:db8::2")) // same /64
	o := c.Key(netip.MustParseAddr("2001:db8:0:1::1"))
	require.Equal(t, a, b)
	for range 3 {
		require.True(t, c.Acquire(a))
	}
	assert.False(t, c.Acquire(b), "the /64 holds its limit")
	assert.True(t, c.Acquire(o), "another /64 is not held back")
	assert.Equal(t, 3, c.Count(a))
	c.Release(a)
	assert.True(t, c.Acquire(b), "a place freed is taken again")
	for range 3 {
		c.Release(a)
	}
	c.Release(o)
	assert.Zero(t, c.Sources(), "entries go at zero")
	assert.Panics(t, func() { c.Release(a) })
}

// TestCounter_model runs random acquires and releases from several
// goroutines against a plain map per goroutine's own sources, then checks
// the totals, and that memory comes back: no entry is left.
func TestCounter_model(t *testing.T) {
	const limit = 5
	c, err := sources.New(limit, 32, 64)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			held := map[netip.Addr]int{}
			for range 20000 {
				key := c.Key(netip.AddrFrom4([4]byte{10, byte(g), 0, byte(r.IntN(200))}))
				if r.IntN(2) == 0 {
					ok := c.Acquire(key)
					if ok != (held[key] < limit) {
						t.Errorf("Acquire(%v) = %v with %d held", key, ok, held[key])
						return
					}
					if ok {
						held[key]++
					}
				} else if held[key] > 0 {
					c.Release(key)
					held[key]--
				}
			}
			for k, n := range held {
				if got := c.Count(k); got != n {
					t.Errorf("Count(%v) = %d, want %d", k, got, n)
				}
				for range n {
					c.Release(k)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, c.Sources())
}

func TestCounter_allocs(t *testing.T) {
	c, err := sources.New(10, 32, 64)
	require.NoError(t, err)
	key := c.Key(netip.MustParseAddr("192.0.2.1"))
	other := c.Key(netip.MustParseAddr("192.0.2.2"))
	require.True(t, c.Acquire(other)) // the shard's map holds an entry
	allocs := testing.AllocsPerRun(1000, func() {
		c.Acquire(key)
		c.Release(key)
	})
	assert.Zero(t, allocs)
}

// preloaded returns a counter holding one connection of each of n
// sources, and their keys.
func preloaded(b *testing.B, n int) (*sources.Counter, []netip.Addr) {
	c, err := sources.New(1<<20, 32, 64)
	require.NoError(b, err)
	keys := make([]netip.Addr, n)
	for i := range keys {
		keys[i] = c.Key(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
		c.Acquire(keys[i])
	}
	return c, keys
}

func BenchmarkCounter_AcquireRelease(b *testing.B) {
	for _, n := range []int{1, 1000, 100000} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
			c, keys := preloaded(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := keys[i%n]
				c.Acquire(k)
				c.Release(k)
				i++
			}
		})
	}
}

func BenchmarkCounter_AcquireReleaseParallel(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
			c, keys := preloaded(b, n)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(n)
				for pb.Next() {
					k := keys[i%n]
					c.Acquire(k)
					c.Release(k)
					i++
				}
			})
		})
	}
}

func BenchmarkCounter_Key(b *testing.B) {
	c, err := sources.New(1, 32, 64)
	require.NoError(b, err)
	for _, bc := range []struct{ name, addr string }{{"family=4", "192.0.2.1"}, {"family=6", "2001:db8::1"}} {
		a := netip.MustParseAddr(bc.addr)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.Key(a)
			}
		})
	}
}
