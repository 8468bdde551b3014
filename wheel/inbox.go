package wheel

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The inbox: how a resetter tells the driver about a timer it must look at
// (a new arming, an earlier deadline, a stop). It is a handful of
// cache-line-padded Treiber stacks, sharded by timer address: a push is one
// compare-and-swap, and the driver takes a whole stack with one swap, so
// there is no ABA problem and no stub node. Which goroutine owns a pushed
// timer's qnext is decided by stateQueued (see Timer).

type inboxShard struct {
	head atomic.Pointer[Timer]
	_    [56]byte
}

type inbox struct {
	shards []inboxShard
	shift  uint
}

// init sizes the inbox for procs processors: twice as many shards, from 4
// to 64.
func (in *inbox) init(procs int) {
	n := 4
	for n < 2*procs && n < 64 {
		n *= 2
	}
	in.shards = make([]inboxShard, n)
	in.shift = uint(64 - bits.TrailingZeros(uint(n)))
}

// push links t, whose queued bit the caller just set, on its shard.
func (in *inbox) push(t *Timer) {
	s := &in.shards[(uint64(uintptr(unsafe.Pointer(t)))*0x9E3779B97F4A7C15)>>in.shift]
	for {
		h := s.head.Load()
		t.qnext = h
		if s.head.CompareAndSwap(h, t) {
			return
		}
	}
}

// take removes every timer on shard i and returns them linked by qnext.
func (in *inbox) take(i int) *Timer { return in.shards[i].head.Swap(nil) }

// empty reports whether every shard was empty when looked at.
func (in *inbox) empty() bool {
	for i := range in.shards {
		if in.shards[i].head.Load() != nil {
			return false
		}
	}
	return true
}
