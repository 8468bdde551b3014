package idle

import "time"

// WriteStall is the write-stall policy as pure logic: it decides when a
// connection's queued output has made no progress for a timeout, which
// means the peer has stopped reading. It measures time without progress,
// not time with output queued: a peer that keeps reading, however slowly,
// never stalls, and one that stops stalls the timeout after its last
// progress, never before.
//
// The caller tells it what it sees, at times it passes (now, a reading of
// the caller's clock, such as the wheel's Now): Queued when output is
// queued, with the count of bytes that have left the queue so far; Acked
// with the count of bytes the peer has acknowledged (where the caller can
// read it, such as TCP_INFO's tcpi_bytes_acked: a kernel send buffer
// accepts new bytes only once much of it is free, so a slow reader may
// drain nothing from the queue for a long time while it acknowledges
// steadily); Empty when nothing is queued. A change in either count is
// progress. The caller then asks Stalled, or arms a timer for Due and asks
// Stalled when it fires.
//
// It is never early: progress is seen only after it happened, so the
// time since the last progress seen is at most the time since the last
// progress, and Stalled reports true only when that is at least the
// timeout. That holds if, before asking Stalled at now, the caller has told
// it every count it can read at now; a count read earlier may hide
// progress made since. It is late by as much as the caller is late to ask.
//
// The timeout is an argument, not a field, so that a WriteStall holds only
// the state of one connection (32 bytes) and a server keeps one timeout for
// all. A timeout of zero or less is off: nothing stalls. The zero WriteStall
// has nothing queued. Its methods are O(1) and allocation-free; a
// WriteStall belongs to one goroutine at a time (the caller synchronizes).
type WriteStall struct {
	since   time.Duration // when progress was last seen, or output began to queue
	drained uint64        // the count of drained bytes last told (Queued)
	acked   uint64        // the count of acknowledged bytes last told (Acked)
	queued  bool          // output is queued: Queued was told last, not Empty
}

// Queued records that output is queued at now, of which drained bytes have
// left the queue so far (a count that only grows; its origin is the
// caller's). If nothing was queued before, the timeout runs from now;
// otherwise a drained count other than the last is progress at now.
func (s *WriteStall) Queued(now time.Duration, drained uint64) {
	if !s.queued || drained != s.drained {
		s.queued, s.drained, s.since = true, drained, now
	}
}

// Acked records that the peer has acknowledged acked bytes by now (a count
// that only grows). While output is queued, a count other than the last is
// progress at now; while nothing is, the count is only kept, to compare the
// next with.
func (s *WriteStall) Acked(now time.Duration, acked uint64) {
	if acked == s.acked {
		return
	}
	s.acked = acked
	if s.queued {
		s.since = now
	}
}

// Empty records that nothing is queued: the write-stall clock stops, and
// the next Queued starts it again.
func (s *WriteStall) Empty() { s.queued = false }

// Pending reports whether output is queued (Queued was told last, not
// Empty).
func (s *WriteStall) Pending() bool { return s.queued }

// Due returns when the output stalls unless progress is seen first: the
// timeout after the last progress seen, or after output began to queue,
// clamped to the largest Duration. It returns false when nothing is queued
// or timeout is off (zero or less).
func (s *WriteStall) Due(timeout time.Duration) (time.Duration, bool) {
	if !s.queued || timeout <= 0 {
		return 0, false
	}
	if due := s.since + timeout; due >= s.since {
		return due, true
	}
	return 1<<63 - 1, true
}

// Stalled reports whether at now the output has stalled: it is queued and
// no progress has been seen for timeout or longer (now is at or after Due).
// Tell it what can be read at now first (see WriteStall). It is false when
// timeout is off (zero or less).
func (s *WriteStall) Stalled(now, timeout time.Duration) bool {
	due, ok := s.Due(timeout)
	return ok && now >= due
}
