package netserver_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// splitSeedEnv names the environment variable that fixes the seed of
// TestFramed_RandomSplits, to repeat a failure.
const splitSeedEnv = "NETSERVER_SPLIT_SEED"

// TestFramed_RandomSplits streams many DATA frames of random sizes, from one
// byte up to a MaxFrame three times gnet's 64 KiB read buffer, cut at random
// boundaries: runs of one byte per write, cuts inside frames, many frames in
// one write. The echoed payloads, in order, must equal what was sent, byte for
// byte. The client acknowledges the echoes as they arrive (more frames are
// sent than the server's retransmission window holds) and keeps at most
// clientWindow echoes outstanding.
func TestFramed_RandomSplits(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(splitSeedEnv); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, splitSeedEnv)
	}
	t.Logf("seed %d (%s=%d repeats it)", seed, splitSeedEnv, seed)

	const (
		maxFrame = 200 << 10
		runs     = 3 // connections, at once, each with its own stream
		frames   = retransmit.DefaultWindow + 176
		timeout  = time.Minute // detects a hang: a busy machine may take this long
	)
	require.Greater(t, maxFrame, 3*(64<<10), "some frames must not fit gnet's read buffer")
	cfg := framedCfg()
	cfg.MaxFrame = maxFrame
	s := start(t, cfg, nil)

	results := make([]splitResult, runs)
	var wg sync.WaitGroup
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		payloads := randomPayloads(rng, frames, maxFrame-(frame.DataHeaderSize-frame.LenSize))
		wg.Go(func() {
			results[run] = randomSplitRun(t, s.Addr().String(), rng, payloads, maxFrame, timeout)
		})
	}
	wg.Wait()
	var failed []string
	for run, r := range results {
		t.Logf("run %d: %d frames, %d bytes sent in %d writes (%d of one byte); %d frames, %d bytes echoed in %v",
			run, r.frames, r.sent, r.writes, r.oneByte, r.echoes, r.echoed, r.took.Round(time.Millisecond))
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("run %d: %d of %d bytes echoed intact: %v", run, r.intact, r.sent, r.err))
		}
	}
	assert.Empty(t, failed, "%d of %d runs lost or changed bytes (seed %d):\n%s",
		len(failed), runs, seed, strings.Join(failed, "\n"))
}

// randomPayloads returns n payloads: the first of one byte, one of maxPayload
// bytes (the longest frame accepted), four more larger than gnet's read
// buffer, a few percent of up to 8 KiB and the rest of up to 64 bytes, all
// of random bytes.
func randomPayloads(rng *rand.Rand, n, maxPayload int) [][]byte {
	sizes := make([]int, n)
	for i := range sizes {
		switch r := rng.IntN(100); {
		case r < 5:
			sizes[i] = 65 + rng.IntN(8<<10)
		default:
			sizes[i] = 1 + rng.IntN(64)
		}
	}
	sizes[0] = 1
	sizes[1+rng.IntN(n-1)] = maxPayload
	for range 4 {
		sizes[1+rng.IntN(n-1)] = 64<<10 + rng.IntN(maxPayload-64<<10)
	}
	payloads := make([][]byte, n)
	for i, size := range sizes {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		payloads[i] = p
	}
	return payloads
}

// splitResult is what one connection of TestFramed_RandomSplits did.
type splitResult struct {
	frames, echoes  int
	sent, echoed    int // payload bytes
	intact          int // leading payload bytes echoed correctly
	writes, oneByte int
	took            time.Duration
	err             error
}

// randomSplitRun sends payloads on a connection of its own, cut at random
// places, and compares the echoes.
func randomSplitRun(t *testing.T, addr string, rng *rand.Rand, payloads [][]byte, maxFrame int, timeout time.Duration) (r splitResult) {
	began := time.Now()
	defer func() { r.took = time.Since(began) }()
	r.frames = len(payloads)
	var want []byte
	for _, p := range payloads {
		want = append(want, p...)
	}
	r.sent = len(want)
	w, err := testpeer.Dial(t, addr, maxFrame)
	if err != nil {
		r.err = err
		return r
	}
	defer w.Close()
	deadline := time.Now().Add(timeout)
	if err := w.SetWriteDeadline(deadline); err != nil {
		r.err = err
		return r
	}

	sw := &splitWriter{w: w, rng: rng, payloads: payloads, progress: make(chan struct{}, 1), done: make(chan struct{})}
	var got []byte
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(sw.done)
		got, readErr = sw.read(deadline)
	})
	// A failed write (the server closed) ends the writer; the reader goes on
	// to the server's CLOSE, or to the deadline.
	writeErr := sw.write(deadline)
	wg.Wait()
	r.writes, r.oneByte = sw.writes, sw.oneByte
	r.echoes, r.echoed = int(sw.seen.Load()), len(got)
	for r.intact < min(len(got), len(want)) && got[r.intact] == want[r.intact] {
		r.intact++
	}
	switch {
	case readErr != nil:
		r.err = readErr
	case writeErr != nil:
		r.err = writeErr
	case !bytes.Equal(got, want):
		r.err = fmt.Errorf("echoed %d bytes, sent %d; first difference at byte %d", len(got), len(want), r.intact)
	default:
		// Everything came back; the connection must still be open.
		const nonce = 0x5ca1
		if _, err := w.Write(frame.AppendPing(nil, nonce)); err != nil {
			r.err = fmt.Errorf("PING after the echoes: %w", err)
			return r
		}
		for {
			f, err := w.Next(time.Until(deadline))
			if err != nil {
				r.err = fmt.Errorf("waiting for PONG after the echoes: %w", err)
				return r
			}
			if f.Type == frame.TypePong && f.Nonce == nonce {
				break
			}
			if f.Type != frame.TypeAck && !(f.Type == frame.TypeData && f.Seq <= uint64(len(payloads))) {
				r.err = fmt.Errorf("waiting for PONG after the echoes: got %v code=%v seq=%d", f.Type, f.Code, f.Seq)
				return r
			}
		}
	}
	return r
}

// clientWindow bounds the DATA frames the client sends ahead of the echoes
// it has read, far below the server's retransmit.DefaultWindow, so the
// server's window never fills whatever the scheduling.
const clientWindow = 256

// splitWriter writes a stream of DATA frames, and ACKs of the echoes the
// reader has seen, cut at random places. ACKs go between frames (they are
// part of the stream and are cut like the rest).
//
// Ownership: seen is written by the reader and read by the writer; progress
// is signalled by the reader after each new echo; done is closed when the
// reader returns. Everything else belongs to the writer.
type splitWriter struct {
	w        *testpeer.Peer
	rng      *rand.Rand
	payloads [][]byte
	seen     atomic.Uint64 // echoes read, in order
	progress chan struct{}
	done     chan struct{}

	pending []byte // the stream's next bytes, not written yet
	next    int    // index of the next payload to append to pending
	acked   uint64 // the last ACK appended to pending
	writes  int
	oneByte int
}

// read reads the server's frames until every payload has been echoed, and
// returns the echoed payloads, concatenated. A retransmitted echo must equal
// the first.
func (sw *splitWriter) read(deadline time.Time) ([]byte, error) {
	n := uint64(len(sw.payloads))
	var got []byte
	var ends []int // ends[i]: where echo i+1 ends in got
	for sw.seen.Load() < n {
		f, err := sw.w.Next(time.Until(deadline))
		if err != nil {
			return got, fmt.Errorf("after %d of %d echoes: %w", sw.seen.Load(), n, err)
		}
		seen := sw.seen.Load()
		switch f.Type {
		case frame.TypeData:
			switch {
			case f.Seq == seen+1:
				got = append(got, f.Payload...)
				ends = append(ends, len(got))
				sw.seen.Store(f.Seq)
				select {
				case sw.progress <- struct{}{}:
				default:
				}
			case f.Seq >= 1 && f.Seq <= seen:
				from := 0
				if f.Seq > 1 {
					from = ends[f.Seq-2]
				}
				if !bytes.Equal(f.Payload, got[from:ends[f.Seq-1]]) {
					return got, fmt.Errorf("retransmitted echo %d differs from the first", f.Seq)
				}
			default:
				return got, fmt.Errorf("echo numbered %d after %d", f.Seq, seen)
			}
		case frame.TypeAck:
			if f.Seq > n {
				return got, fmt.Errorf("ACK %d of DATA never sent", f.Seq)
			}
		case frame.TypeClose:
			return got, fmt.Errorf("CLOSE %v %q after %d of %d echoes", f.Code, f.Reason, seen, n)
		default:
			return got, fmt.Errorf("unexpected %v after %d of %d echoes", f.Type, seen, n)
		}
	}
	return got, nil
}

// write sends the stream, then ACKs the echoes until the reader is done.
func (sw *splitWriter) write(deadline time.Time) error {
	stop := time.NewTimer(time.Until(deadline))
	defer stop.Stop()
	for sw.next < len(sw.payloads) || len(sw.pending) > 0 {
		select {
		case <-sw.done:
			return nil // the reader saw an error
		default:
		}
		size, oneByOne := sw.chunk()
		if !sw.fill(size) { // the client's window is full and nothing is pending
			select {
			case <-sw.progress:
				continue
			case <-sw.done:
				return nil // the reader saw an error, or everything
			case <-stop.C:
				return fmt.Errorf("writer: no echo for %d frames ahead", clientWindow)
			}
		}
		size = min(size, len(sw.pending))
		if err := sw.send(sw.pending[:size], oneByOne); err != nil {
			return err
		}
		sw.pending = sw.pending[:copy(sw.pending, sw.pending[size:])]
		if sw.rng.IntN(8) == 0 {
			time.Sleep(200 * time.Microsecond) // pacing: let the server read what we wrote
		}
	}
	for {
		if seen := sw.seen.Load(); seen > sw.acked {
			sw.acked = seen
			if err := sw.send(frame.AppendAck(nil, seen), false); err != nil {
				return err
			}
		}
		select {
		case <-sw.progress:
		case <-sw.done:
			return nil
		case <-stop.C:
			return errors.New("writer: timed out waiting for the echoes")
		}
	}
}

// chunk picks how many bytes the next write takes, and whether they go one
// byte per write.
func (sw *splitWriter) chunk() (size int, oneByOne bool) {
	nextLen := 1
	if sw.next < len(sw.payloads) {
		nextLen = frame.DataHeaderSize + len(sw.payloads[sw.next])
	}
	switch r := sw.rng.IntN(100); {
	case r < 30: // a run of one-byte writes
		return 1 + sw.rng.IntN(24), true
	case r < 40: // a few bytes: cuts in headers
		return 1 + sw.rng.IntN(12), false
	case r < 92: // up to a cut in the next frame, or at its end
		return len(sw.pending) + 1 + sw.rng.IntN(nextLen), false
	default: // many frames in one write, and a piece of the one after
		return len(sw.pending) + 2*nextLen + sw.rng.IntN(64*(frame.DataHeaderSize+64)), false
	}
}

// fill appends frames to pending until it holds size bytes, the stream ends,
// or the next frame would be more than clientWindow ahead of the echoes
// read. An ACK of the echoes read goes before each frame appended. It
// reports false if pending is still empty.
func (sw *splitWriter) fill(size int) bool {
	for len(sw.pending) < size && sw.next < len(sw.payloads) {
		seen := sw.seen.Load()
		if uint64(sw.next+1) > seen+clientWindow {
			break
		}
		if seen > sw.acked {
			sw.pending = frame.AppendAck(sw.pending, seen)
			sw.acked = seen
		}
		sw.pending = frame.AppendData(sw.pending, uint64(sw.next+1), sw.payloads[sw.next])
		sw.next++
	}
	return len(sw.pending) > 0
}

// send writes b in one write, or one byte per write.
func (sw *splitWriter) send(b []byte, oneByOne bool) error {
	if !oneByOne {
		sw.writes++
		_, err := sw.w.Write(b)
		return err
	}
	for i := range b {
		sw.writes++
		sw.oneByte++
		if _, err := sw.w.Write(b[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}
