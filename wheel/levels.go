package wheel

import "math/bits"

// The levels: a hashed hierarchical timing wheel as a plain data structure.
// It knows ticks, not time: the driver decides which tick has come, and
// what to do with each timer it takes out.
//
// 7 levels of 64 slots cover the 41-bit deadline. A deadline goes to the
// level of the highest 6-bit digit in which it differs from cur, the last
// tick processed, in the slot named by that digit; the next occupied slot
// is found with one masked TrailingZeros64 per level. When a slot comes
// round its timers are filed again lower down (or fired). A slot is a
// circular list through a sentinel that knows its index, so a timer can be
// unlinked without knowing its slot.
const (
	slotBits      = 6
	slotsPerLevel = 1 << slotBits
	numLevels     = 7
	numSlots      = numLevels * slotsPerLevel
)

// levels holds the wheel's timers by deadline. It belongs to the driver.
type levels struct {
	cur      uint64          // every tick <= cur has been processed
	heads    [numSlots]Timer // list sentinels: w is nil, state holds the index
	occupied [numLevels]uint64
}

func (l *levels) init(cur uint64) {
	l.cur = cur
	for i := range l.heads {
		h := &l.heads[i]
		h.next, h.prev = h, h
		h.state.Store(uint64(i))
	}
}

// slotFor returns the slot for a deadline after cur.
func (l *levels) slotFor(when uint64) int {
	lv := (63 - bits.LeadingZeros64(when^l.cur)) / slotBits
	return lv*slotsPerLevel + int(when>>(uint(lv)*slotBits))&(slotsPerLevel-1)
}

// link files t in slot idx.
func (l *levels) link(t *Timer, idx int) {
	h := &l.heads[idx]
	t.prev = h
	t.next = h.next
	h.next.prev = t
	h.next = t
	l.occupied[idx/slotsPerLevel] |= 1 << (idx % slotsPerLevel)
}

// unlink takes t out of whatever slot holds it.
func (l *levels) unlink(t *Timer) {
	p, n := t.prev, t.next
	p.next = n
	n.prev = p
	t.next, t.prev = nil, nil
	if p == n && p.w == nil { // only the sentinel is left: the slot is empty
		l.emptied(int(p.state.Load()))
	}
}

func (l *levels) emptied(idx int) { l.occupied[idx/slotsPerLevel] &^= 1 << (idx % slotsPerLevel) }

// next returns the tick of the first occupied slot after cur and its
// index. The lowest occupied level comes first: a level-l slot lies inside
// the current slot of every level above.
func (l *levels) next() (tick uint64, idx int, ok bool) {
	for lv := 0; lv < numLevels; lv++ {
		shift := uint(lv * slotBits)
		digit := (l.cur >> shift) & (slotsPerLevel - 1)
		bm := l.occupied[lv] & (^uint64(0) << (digit + 1))
		if bm != 0 {
			j := uint64(bits.TrailingZeros64(bm))
			tick = l.cur>>(shift+slotBits)<<(shift+slotBits) | j<<shift
			idx = lv*slotsPerLevel + int(j)
			return tick, idx, true
		}
	}
	return 0, 0, false
}

// take empties slot idx and returns its timers as a list linked by next
// (prev cleared), to be filed again or fired one by one.
func (l *levels) take(idx int) *Timer {
	l.emptied(idx)
	h := &l.heads[idx]
	if h.next == h {
		return nil
	}
	first := h.next
	h.prev.next = nil
	h.next, h.prev = h, h
	return first
}
