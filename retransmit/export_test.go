package retransmit

// RingLen reports the length of t's ring of outstanding entries.
func (t *Tracker) RingLen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ring)
}
