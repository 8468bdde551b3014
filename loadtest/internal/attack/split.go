package attack

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"

	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// This file holds the hostile scenarios' pure parts: how the splitter cuts
// its writes, what its messages hold and how their echoes are checked, and
// what the garbage connections send. None of it touches a socket.

// cuts returns the lengths of the writes n bytes go out in, adding up to n:
// whole (one write in 8), one byte per write (one in 4), or cut at random
// boundaries into pieces of at most 2, 8 or 64 bytes. n <= 0 gives none.
func cuts(r *rand.Rand, n int) []int {
	if n <= 0 {
		return nil
	}
	var out []int
	switch k := r.IntN(8); {
	case k == 0:
		return []int{n}
	case k <= 2:
		out = make([]int, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	most := []int{2, 8, 64}[r.IntN(3)]
	for left := n; left > 0; {
		p := 1 + r.IntN(min(left, most))
		out = append(out, p)
		left -= p
	}
	return out
}

// joined returns how many due messages the splitter sends in one burst:
// 1 (six times in ten), 2 (three in ten) or 3.
func joined(r *rand.Rand) int {
	switch k := r.IntN(10); {
	case k < 6:
		return 1
	case k < 9:
		return 2
	}
	return 3
}

// payload returns message k's payload on a splitter connection with this
// seed: size bytes that differ between messages and connections, so that
// an echo out of order or from another connection does not match. O(size),
// one allocation.
func payload(seed, k uint64, size int) []byte {
	p := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, k))
	for i := 0; i < size; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(p[i:], w[:])
	}
	return p
}

// streamCheck checks a raw echo stream byte for byte against the messages
// sent, as they arrive in pieces of any size. It is used by one goroutine
// (the reader).
type streamCheck struct {
	seed uint64
	size int

	cur     []byte // message next+1's expected bytes
	off     int    // bytes of it seen
	bad     bool   // a byte of it differed
	checked uint64 // messages whose every byte arrived
	// Mismatched counts the messages with at least one wrong byte.
	Mismatched uint64
}

func newStreamCheck(seed uint64, size int) *streamCheck {
	return &streamCheck{seed: seed, size: size, cur: payload(seed, 1, size)}
}

// feed checks the next bytes of the stream.
func (c *streamCheck) feed(b []byte) {
	for len(b) > 0 {
		n := min(len(b), c.size-c.off)
		if !bytes.Equal(b[:n], c.cur[c.off:c.off+n]) {
			c.bad = true
		}
		b, c.off = b[n:], c.off+n
		if c.off == c.size {
			c.checked++
			if c.bad {
				c.Mismatched++
			}
			c.cur, c.off, c.bad = payload(c.seed, c.checked+1, c.size), 0, false
		}
	}
}

// Checked returns how many whole messages have been checked.
func (c *streamCheck) Checked() uint64 { return c.checked }

// dataCheck checks the server's DATA frames on a framed splitter
// connection: the k-th new one (sequence number k) must carry message k's
// payload. A retransmission (a sequence number already seen) is checked too
// but not counted again. Used by one goroutine (the reader).
type dataCheck struct {
	seed uint64
	size int

	next       uint64 // sequence number expected next (from 1)
	Mismatched uint64 // DATA whose payload differed (new or retransmitted)
	Gaps       uint64 // sequence numbers skipped: messages the server never sent
	Dups       uint64 // retransmissions seen
}

func newDataCheck(seed uint64, size int) *dataCheck {
	return &dataCheck{seed: seed, size: size, next: 1}
}

// data checks one DATA frame and reports whether it was new.
func (c *dataCheck) data(seq uint64, p []byte) bool {
	if seq == 0 || !bytes.Equal(p, payload(c.seed, seq, c.size)) {
		c.Mismatched++
	}
	switch {
	case seq < c.next:
		c.Dups++
		return false
	case seq > c.next:
		c.Gaps += seq - c.next
	}
	c.next = seq + 1
	return true
}

// Checked returns how many distinct messages have come back.
func (c *dataCheck) Checked() uint64 { return c.next - 1 - c.Gaps }

// HugeLength is the length prefix the huge_length garbage connection sends.
const HugeLength = 0xFFFFFFF0

// garbage returns the n (at least frame.DataHeaderSize) bytes a garbage
// connection in this role sends. Random bytes read as a frame almost surely
// have a length beyond any frame limit (or, below it, an unknown type).
func garbage(r *rand.Rand, role string, n int) []byte {
	n = max(n, frame.DataHeaderSize)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	switch role {
	case scenario.GarbageBadType:
		binary.BigEndian.PutUint32(b, uint32(n-frame.LenSize))
		b[frame.LenSize] = byte(frame.TypeGoAway + 1 + frame.Type(r.IntN(249))) // past every known type
	case scenario.GarbageHugeLength:
		binary.BigEndian.PutUint32(b, HugeLength)
		b[frame.LenSize] = byte(frame.TypeData)
	}
	return b
}
