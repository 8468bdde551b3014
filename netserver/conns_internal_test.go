package netserver

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoop_Conns adds and removes connections in a random order and checks
// the loop's slice against a set: every open connection once, at its slot;
// a connection never added (refused) is not removed in another's place;
// and the slice shrinks once the connections have gone.
func TestLoop_Conns(t *testing.T) {
	l := &loop{}
	rng := rand.New(rand.NewPCG(1, 2))
	open := map[*Conn]bool{}
	var all []*Conn
	check := func() {
		t.Helper()
		require.Len(t, l.conns, len(open))
		for i, c := range l.conns {
			if c.slot != int32(i) || !open[c] {
				t.Fatalf("conns[%d]: slot %d, open %v", i, c.slot, open[c])
			}
		}
	}
	for range 5000 {
		if len(all) == 0 || rng.IntN(3) != 0 {
			c := &Conn{}
			l.addConn(c)
			open[c] = true
			all = append(all, c)
			continue
		}
		i := rng.IntN(len(all))
		c := all[i]
		all[i] = all[len(all)-1]
		all = all[:len(all)-1]
		l.removeConn(c)
		delete(open, c)
		check()
	}
	check()
	l.removeConn(&Conn{}) // refused: slot 0 belongs to another
	check()
	grown := cap(l.conns)
	for _, c := range all {
		l.removeConn(c)
	}
	assert.Empty(t, l.conns)
	assert.Less(t, cap(l.conns), grown/2, "the slice shrinks")
}
