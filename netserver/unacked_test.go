package netserver

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The queue against a model (a slice of copies), through random pushes and
// acknowledgements.
func TestUnackedQueue_Model(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q unackedQueue
	var model [][]byte
	for step := range 20000 {
		pushed := rng.IntN(3) > 0 || len(model) == 0
		if pushed {
			msg := make([]byte, rng.IntN(300))
			for i := range msg {
				msg[i] = byte(rng.Uint32())
			}
			q.push(msg)
			model = append(model, msg)
		} else {
			n := 1 + rng.IntN(len(model))
			q.pop(n)
			model = model[n:]
		}
		require.Equal(t, len(model), q.len(), "step %d", step)
		total := 0
		for _, m := range model {
			total += len(m)
		}
		require.Equal(t, total, q.bytes(), "step %d", step)
		if len(model) > 0 {
			require.True(t, bytes.Equal(model[0], q.front()), "step %d: front", step)
		}
		if pushed {
			// Memory follows what is held: after a push the dead head
			// never outweighs the live bytes, and the capacity is at
			// most four times them or keepCap.
			require.LessOrEqual(t, q.start, q.bytes(), "step %d", step)
			require.LessOrEqual(t, cap(q.buf), max(keepCap, 4*q.bytes()), "step %d", step)
		}
	}
}

// A small message costs its bytes, not a buffer of its own, and an emptied
// queue does not pin a burst's worth of memory.
func TestUnackedQueue_Memory(t *testing.T) {
	var q unackedQueue
	for range 1000 {
		q.push([]byte{1})
	}
	assert.Equal(t, 1000, q.bytes())
	assert.LessOrEqual(t, cap(q.buf), 2048, "1000 one-byte messages")
	big := make([]byte, 64<<10)
	for range 16 {
		q.push(big)
	}
	q.pop(q.len())
	assert.Zero(t, q.len())
	assert.Nil(t, q.buf, "a 1 MiB burst's buffer is let go once acknowledged")
	q.push([]byte("x"))
	q.pop(1)
	assert.NotNil(t, q.buf, "a small buffer is kept for the next message")
	q.reset(true)
	assert.Nil(t, q.buf)
	assert.Nil(t, q.lens)

	// A burst's capacity is not pinned by the little left after it.
	for range 16 {
		q.push(big)
	}
	q.pop(15)
	q.push([]byte("y"))
	assert.LessOrEqual(t, cap(q.buf), 4*q.bytes(), "capacity follows the bytes held")
	assert.Equal(t, big, q.front())
}

func TestUnackedQueue_PushAllocationFree(t *testing.T) {
	var q unackedQueue
	msg := make([]byte, 100)
	for range 50 {
		q.push(msg)
	}
	q.pop(50)
	allocs := testing.AllocsPerRun(1000, func() {
		q.push(msg)
		q.push(msg)
		q.pop(2)
	})
	assert.Zero(t, allocs)
}
