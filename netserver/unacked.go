package netserver

// unackedQueue keeps copies of the DATA payloads a connection sent and the
// peer has not acknowledged, oldest first, back to back in one buffer: a
// 1-byte message costs 1 byte and a length, not a buffer of its own. It
// belongs to the connection's event loop.
//
// Pushes append at the end; acknowledgements advance start. The dead head
// is reclaimed by moving the live bytes down when it outweighs them, so
// each byte is copied O(1) times on average. The buffer's capacity is at
// most about four times the bytes held (bounded by Limits.UnackedBytes) or
// keepCap, whichever is more: a push that finds it larger moves the live
// bytes to a buffer twice their size, so a burst's capacity is not pinned
// by the little left after it, and an emptied queue lets a buffer larger
// than keepCap go.
type unackedQueue struct {
	buf   []byte   // buf[start:] are the payloads, in order
	start int      // first live byte of buf
	lens  []uint32 // lens[head:] are the payloads' lengths, oldest first
	head  int      // first live entry of lens
}

// keepCap is the most an empty queue keeps allocated, per slice.
const keepCap = 16 << 10

// push appends a copy of msg. O(len(msg)) amortized; allocation-free once the
// buffer has grown to the connection's working size.
func (q *unackedQueue) push(msg []byte) {
	if live := len(q.buf) - q.start; cap(q.buf) > keepCap && cap(q.buf) > 4*(live+len(msg)) {
		buf := make([]byte, live, max(keepCap, 2*(live+len(msg))))
		copy(buf, q.buf[q.start:])
		q.buf, q.start = buf, 0
	}
	if q.start > 0 && q.start >= len(q.buf)-q.start {
		n := copy(q.buf, q.buf[q.start:])
		q.buf = q.buf[:n]
		q.start = 0
	}
	if q.head > 0 && q.head >= len(q.lens)-q.head {
		n := copy(q.lens, q.lens[q.head:])
		q.lens = q.lens[:n]
		q.head = 0
	}
	q.buf = append(q.buf, msg...)
	q.lens = append(q.lens, uint32(len(msg)))
}

// len and bytes report how many payloads, and payload bytes, the queue holds.
func (q *unackedQueue) len() int   { return len(q.lens) - q.head }
func (q *unackedQueue) bytes() int { return len(q.buf) - q.start }

// front returns the oldest payload; the queue must not be empty. It aliases
// the queue's buffer until the next push or pop.
func (q *unackedQueue) front() []byte {
	return q.buf[q.start : q.start+int(q.lens[q.head])]
}

// pop drops the n oldest payloads (n <= len).
func (q *unackedQueue) pop(n int) {
	for range n {
		q.start += int(q.lens[q.head])
		q.head++
	}
	if q.len() == 0 {
		q.reset(false)
	}
}

// reset empties the queue, releasing its buffers if all is set or they grew
// past keepCap.
func (q *unackedQueue) reset(all bool) {
	q.start, q.head = 0, 0
	if all || cap(q.buf) > keepCap {
		q.buf = nil
	} else {
		q.buf = q.buf[:0]
	}
	if all || cap(q.lens)*4 > keepCap {
		q.lens = nil
	} else {
		q.lens = q.lens[:0]
	}
}
