// Package sources counts a server's open connections by source, the
// client's address or its network, and bounds how many one source may hold,
// so that no source can take every connection a server has.
//
// A source is an IPv4 address (or the network of its first IPv4Bits bits)
// or an IPv6 network of its first IPv6Bits bits (/64 by default: one site,
// which can hold any number of addresses). The counts are shared by every
// event loop: a Counter is sharded by source, each shard under a lock of its
// own, so loops opening connections from different sources rarely meet. An
// entry is deleted when its count falls to zero, and a shard's map is
// rebuilt once it holds an eighth of its peak, so memory follows the sources
// present, not the most ever seen.
//
// It is not a rate limit: a source may open and close connections as fast
// as it likes, as long as it holds no more than the limit at once.
package sources

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
)

// numShards is the number of shards, a power of two: enough that event
// loops on different cores rarely take the same lock.
const numShards = 64

// Counter counts open connections per source and bounds them. Its methods
// may be called from any goroutine.
type Counter struct {
	// limit, v4Bits and v6Bits are set by New and never written again.
	limit          int32
	v4Bits, v6Bits int
	shards         [numShards]shard
}

// shard is a part of a Counter's sources. Every field is guarded by mu.
type shard struct {
	mu sync.Mutex
	m  map[netip.Addr]int32 // nil until a source of the shard's is counted
	// peak is the most entries m has held since it was made: a map keeps
	// its buckets when entries go, so m is rebuilt when len(m) falls to
	// peak/8.
	peak int
	_    [64 - 24]byte // one shard per cache line (mu 8, m 8, peak 8)
}

// shrinkFloor is the peak below which a shard's map is never rebuilt: a
// small map costs little however empty it is.
const shrinkFloor = 64

// New returns a Counter that lets each source hold at most limit
// connections (limit >= 1), keyed by the first v4Bits bits of an IPv4
// address (1 to 32) and v6Bits of an IPv6 one (1 to 128).
func New(limit, v4Bits, v6Bits int) (*Counter, error) {
	switch {
	case limit < 1 || limit > 1<<30:
		return nil, fmt.Errorf("sources: limit %d outside [1, 2^30]", limit)
	case v4Bits < 1 || v4Bits > 32:
		return nil, fmt.Errorf("sources: IPv4 prefix /%d outside [/1, /32]", v4Bits)
	case v6Bits < 1 || v6Bits > 128:
		return nil, fmt.Errorf("sources: IPv6 prefix /%d outside [/1, /128]", v6Bits)
	}
	return &Counter{limit: int32(limit), v4Bits: v4Bits, v6Bits: v6Bits}, nil
}

// Key returns the source of a client at a: a without its zone, an
// IPv4-mapped IPv6 address as IPv4, masked to the Counter's prefix. The
// zero Addr's key is itself. O(1), allocation-free.
func (c *Counter) Key(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	bits := c.v6Bits
	if a.Is4() {
		bits = c.v4Bits
	}
	if bits == a.BitLen() || !a.IsValid() {
		return a
	}
	p, _ := a.Prefix(bits) // bits is within a's length
	return p.Addr()
}

// Acquire counts one more connection from source key (a value of Key) and
// returns true, or returns false, counting nothing, when the source already
// holds the limit. O(1) amortized; allocation-free once the shard's map has
// grown to the sources present.
func (c *Counter) Acquire(key netip.Addr) bool {
	s := c.shard(key)
	s.mu.Lock()
	n := s.m[key]
	if n >= c.limit {
		s.mu.Unlock()
		return false
	}
	if s.m == nil {
		s.m = make(map[netip.Addr]int32) // a shard no source has used costs no map
	}
	s.m[key] = n + 1
	if n == 0 {
		s.peak = max(s.peak, len(s.m))
	}
	s.mu.Unlock()
	return true
}

// Release uncounts one connection from source key, which Acquire counted.
// The source's entry goes when its count reaches zero. O(1) amortized: a
// rebuild of the shard's map copies its entries once they are an eighth of
// its peak, which takes at least seven eighths of the peak's releases.
func (c *Counter) Release(key netip.Addr) {
	s := c.shard(key)
	s.mu.Lock()
	switch n := s.m[key]; {
	case n > 1:
		s.m[key] = n - 1
	case n == 1:
		delete(s.m, key)
		if s.peak >= shrinkFloor && len(s.m) <= s.peak/8 {
			m := make(map[netip.Addr]int32, len(s.m))
			for k, v := range s.m {
				m[k] = v
			}
			s.m, s.peak = m, len(m)
		}
	default:
		s.mu.Unlock()
		panic("sources: Release of a source with no connection counted")
	}
	s.mu.Unlock()
}

// Count returns the connections source key holds.
func (c *Counter) Count(key netip.Addr) int {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.m[key])
}

// Sources returns how many sources hold a connection. It takes each shard's
// lock in turn: O(shards), for metrics and tests.
func (c *Counter) Sources() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Limit returns the most connections one source may hold.
func (c *Counter) Limit() int { return int(c.limit) }

// shard returns key's shard: a multiplicative hash of its 16 bytes.
func (c *Counter) shard(key netip.Addr) *shard {
	b := key.As16()
	h := binary.LittleEndian.Uint64(b[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(b[8:])
	h *= 0xbf58476d1ce4e5b9
	return &c.shards[h>>(64-6)]
}
