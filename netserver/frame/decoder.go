package frame

import (
	"errors"
	"fmt"
)

// Decoder splits a byte stream into frames, whatever its segmentation: a
// frame cut across any number of reads, or many frames in one. Feed appends
// what arrived; Next returns the whole frames in order and reports false
// when the next one is not whole yet, which then waits for the next Feed.
// It keeps at most one partial frame (max+LenSize bytes) and what has been
// fed but not yet taken. A Decoder belongs to one goroutine.
type Decoder struct {
	buf []byte
	off int // buf[off:] is not yet decoded
	max int
	err error
}

// NewDecoder returns a Decoder for frames of length at most max (0 means
// DefaultMax).
func NewDecoder(max int) *Decoder {
	if max <= 0 {
		max = DefaultMax
	}
	return &Decoder{max: max}
}

// Feed appends b, which the Decoder copies. It moves what is left of
// earlier input to the front first, so the buffer holds at most the
// undecoded bytes plus b. Allocation-free once the buffer has grown to the
// largest frame seen.
func (d *Decoder) Feed(b []byte) {
	if d.off > 0 {
		n := copy(d.buf, d.buf[d.off:])
		d.buf = d.buf[:n]
		d.off = 0
	}
	d.buf = append(d.buf, b...)
}

// Next returns the next whole frame and true, or false if the next frame is
// not whole yet. A malformed or oversized frame is an error, returned from
// then on: the stream cannot be resynchronized. The Frame's Payload and
// Reason alias the Decoder's buffer until the next Feed.
func (d *Decoder) Next() (Frame, bool, error) {
	if d.err != nil {
		return Frame{}, false, d.err
	}
	f, n, err := Parse(d.buf[d.off:], d.max)
	switch {
	case errors.Is(err, ErrShort):
		return Frame{}, false, nil
	case err != nil:
		d.err = fmt.Errorf("frame: at byte %d of the stream's undecoded input: %w", d.off, err)
		return Frame{}, false, d.err
	}
	d.off += n
	return f, true, nil
}

// Buffered reports how many bytes have been fed and not yet decoded.
func (d *Decoder) Buffered() int { return len(d.buf) - d.off }
