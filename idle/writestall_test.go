package idle_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
)

// stallStep is one instant of a WriteStall table: at that time, the event
// (with its count), then what Due and Stalled must say.
type stallStep struct {
	at      time.Duration
	event   string // "queued", "acked", "empty" or "" (only look)
	count   uint64 // the drained (queued) or acknowledged (acked) count
	due     time.Duration
	pending bool // Due reports a deadline
	stalled bool
}

func TestWriteStall_Steps(t *testing.T) {
	const timeout = 10 * time.Second
	s := time.Second
	tests := []struct {
		name    string
		timeout time.Duration
		steps   []stallStep
	}{
		{name: "nothing queued never stalls", timeout: timeout, steps: []stallStep{
			{at: 0},
			{at: time.Hour},
			{at: time.Hour, event: "acked", count: 100},
		}},
		{name: "queued without progress stalls at the timeout, not a nanosecond before", timeout: timeout, steps: []stallStep{
			{at: 1 * s, event: "queued", count: 0, due: 11 * s, pending: true},
			{at: 5 * s, event: "queued", count: 0, due: 11 * s, pending: true},
			{at: 11*s - 1, due: 11 * s, pending: true},
			{at: 11 * s, due: 11 * s, pending: true, stalled: true},
		}},
		{name: "bytes drained are progress", timeout: timeout, steps: []stallStep{
			{at: 0, event: "queued", count: 0, due: 10 * s, pending: true},
			{at: 9 * s, event: "queued", count: 4096, due: 19 * s, pending: true},
			{at: 18 * s, event: "queued", count: 8192, due: 28 * s, pending: true},
			{at: 27 * s, event: "queued", count: 8192, due: 28 * s, pending: true},
			{at: 28 * s, event: "queued", count: 8192, due: 28 * s, pending: true, stalled: true},
		}},
		{name: "bytes acknowledged are progress while nothing drains", timeout: timeout, steps: []stallStep{
			{at: 0, event: "queued", count: 0, due: 10 * s, pending: true},
			{at: 8 * s, event: "acked", count: 1 << 20, due: 18 * s, pending: true},
			{at: 16 * s, event: "acked", count: 2 << 20, due: 26 * s, pending: true},
			{at: 25 * s, event: "acked", count: 2 << 20, due: 26 * s, pending: true},
			{at: 26 * s, event: "queued", count: 0, due: 26 * s, pending: true, stalled: true},
		}},
		{name: "acknowledgements while nothing is queued are a baseline, not progress", timeout: timeout, steps: []stallStep{
			{at: 0, event: "acked", count: 500},
			{at: 1 * s, event: "queued", count: 0, due: 11 * s, pending: true},
			{at: 2 * s, event: "acked", count: 500, due: 11 * s, pending: true},
			{at: 11 * s, due: 11 * s, pending: true, stalled: true},
		}},
		{name: "empty stops the clock; queued again starts it anew", timeout: timeout, steps: []stallStep{
			{at: 0, event: "queued", count: 0, due: 10 * s, pending: true},
			{at: 9 * s, event: "empty"},
			{at: 30 * s},
			// The drained count is the caller's; the same count after
			// Empty is a new start, not a lack of progress.
			{at: 30 * s, event: "queued", count: 0, due: 40 * s, pending: true},
			{at: 39 * s, due: 40 * s, pending: true},
			{at: 40 * s, due: 40 * s, pending: true, stalled: true},
		}},
		{name: "a stall reported stays until progress", timeout: timeout, steps: []stallStep{
			{at: 0, event: "queued", count: 7, due: 10 * s, pending: true},
			{at: 10 * s, due: 10 * s, pending: true, stalled: true},
			{at: 12 * s, due: 10 * s, pending: true, stalled: true},
			{at: 12 * s, event: "queued", count: 8, due: 22 * s, pending: true},
		}},
		{name: "zero timeout is off", timeout: 0, steps: []stallStep{
			{at: 0, event: "queued", count: 0},
			{at: 100 * time.Hour},
		}},
		{name: "negative timeout is off", timeout: idle.Off, steps: []stallStep{
			{at: 0, event: "queued", count: 0},
			{at: 100 * time.Hour},
		}},
		{name: "a due beyond the clock's range is clamped", timeout: math.MaxInt64, steps: []stallStep{
			{at: 5 * s, event: "queued", count: 0, due: math.MaxInt64, pending: true},
			{at: math.MaxInt64 - 1, due: math.MaxInt64, pending: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ws idle.WriteStall
			for i, st := range tt.steps {
				switch st.event {
				case "queued":
					ws.Queued(st.at, st.count)
				case "acked":
					ws.Acked(st.at, st.count)
				case "empty":
					ws.Empty()
				case "":
				default:
					t.Fatalf("step %d: unknown event %q", i, st.event)
				}
				due, ok := ws.Due(tt.timeout)
				assert.Equal(t, st.pending, ok, "step %d (%v %s): Due reports a deadline", i, st.at, st.event)
				assert.Equal(t, st.due, due, "step %d (%v %s): Due", i, st.at, st.event)
				assert.Equal(t, st.stalled, ws.Stalled(st.at, tt.timeout), "step %d (%v %s): Stalled", i, st.at, st.event)
			}
		})
	}
}

// TestWriteStall_Pending follows what is queued, whatever the timeout.
func TestWriteStall_Pending(t *testing.T) {
	var ws idle.WriteStall
	require.False(t, ws.Pending(), "the zero WriteStall has nothing queued")
	ws.Queued(time.Second, 0)
	require.True(t, ws.Pending())
	ws.Acked(2*time.Second, 10)
	require.True(t, ws.Pending())
	ws.Empty()
	require.False(t, ws.Pending())
}

// FuzzWriteStall_NeverEarly drives a WriteStall as a server does, against
// a model of the peer and the caller: the server queues output and the peer
// drains or acknowledges it at instants of their own; the caller looks at
// other instants, reading both counts then, and asks Stalled. A stall must
// never be reported less than the timeout after the peer's last progress
// (or the output's first queueing), and Stalled must say what the model
// says: stalled when the output has been queued for the timeout since the
// first look that saw the last progress.
func FuzzWriteStall_NeverEarly(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{0x10, 0x81, 0x42, 0x03, 0xc4, 0x25, 0x86, 0x47, 0x08, 0xf9, 0x3a, 0x1b})
	f.Add([]byte{0x00, 0x00, 0xb0, 0x00, 0xbf, 0xff, 0xbf, 0xff, 0x2f, 0xff, 0xb0, 0x01})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const timeout = 100 * time.Millisecond
		var (
			ws       idle.WriteStall
			now      time.Duration
			queued   bool          // output is queued
			drained  uint64        // bytes drained so far
			acked    uint64        // bytes acknowledged so far
			progress time.Duration // last progress, or when output began to queue
			changed  bool          // progress since the last look
			seen     time.Duration // the look that first saw the last progress
		)
		for len(ops) >= 2 {
			op, arg := ops[0], ops[1]
			ops = ops[2:]
			// Up to 64 ms later: the timeout takes a few steps.
			now += time.Duration(int(op&0x0f)<<8|int(arg)) * time.Millisecond / 64
			switch op >> 4 & 3 {
			case 0: // the server writes: output queues, or more of it
				if !queued {
					queued, progress, changed = true, now, true
				}
			case 1: // the peer reads some bytes, or all that is queued
				if queued {
					drained++
					queued = arg%4 != 0
					progress, changed = now, true
				}
			case 2: // the peer acknowledges bytes
				acked++
				if queued {
					progress, changed = now, true
				}
			}
			if op&0x80 == 0 {
				continue // no look at this instant
			}
			if queued {
				ws.Queued(now, drained)
			} else {
				ws.Empty()
			}
			ws.Acked(now, acked)
			if changed {
				seen, changed = now, false
			}
			stalled := ws.Stalled(now, timeout)
			require.Equal(t, queued && now-seen >= timeout, stalled,
				"at %v: queued %v, last progress %v, seen %v", now, queued, progress, seen)
			if stalled {
				require.GreaterOrEqual(t, now-progress, timeout, "stalled %v after the last progress", now-progress)
			}
		}
	})
}

// BenchmarkWriteStall_Look measures a look at queued output as a server's
// timer makes it: both counts told (one of them progress), then the
// question. It allocates nothing.
func BenchmarkWriteStall_Look(b *testing.B) {
	var ws idle.WriteStall
	var now time.Duration
	var drained uint64
	b.ReportAllocs()
	for b.Loop() {
		now += time.Millisecond
		drained += 4096
		ws.Queued(now, drained)
		ws.Acked(now, drained)
		if ws.Stalled(now, 30*time.Second) {
			b.Fatal("stalled while draining")
		}
	}
}

func TestWriteStall_NoAllocs(t *testing.T) {
	var ws idle.WriteStall
	var now time.Duration
	allocs := testing.AllocsPerRun(100, func() {
		now += time.Millisecond
		ws.Queued(now, uint64(now))
		ws.Acked(now, uint64(now))
		_ = ws.Stalled(now, time.Second)
		_, _ = ws.Due(time.Second)
		ws.Empty()
	})
	assert.Zero(t, allocs)
}
