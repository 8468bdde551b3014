package netserver_test

// Tests that the framed protocol does not depend on how TCP cuts the inbound
// byte stream: a decoder must keep a partial frame until the rest
// arrives, and never assume that one read is one frame.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// wire is a framed client connection that, unlike client, may be driven from
// any goroutine: it returns errors instead of failing the test. It reads
// the server's frames through frame.Conn, with the Conn's replies off, and
// the test writes its frames, encoded with frame's functions and cut as it
// pleases, on c. Its reads and its writes may run in two goroutines at
// once, but each in only one.
type wire struct {
	c  *net.TCPConn
	fc *frame.Conn // reads only
}

// dialWire connects to addr with TCP_NODELAY, so every Write leaves at once
// as its own segment, and accepts frames of length up to max.
func dialWire(addr string, max int) (*wire, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	if err := tc.SetNoDelay(true); err != nil {
		tc.Close()
		return nil, err
	}
	fc := frame.NewConn(tc, max)
	fc.SetReplies(0)
	return &wire{c: tc, fc: fc}, nil
}

// next reads the server's next frame, failing once deadline passes; io.EOF
// (or a reset) means the server closed the connection. The frame's Payload
// and Reason are valid until the next call.
func (w *wire) next(deadline time.Time) (frame.Frame, error) {
	if err := w.c.SetReadDeadline(deadline); err != nil {
		return frame.Frame{}, err
	}
	return w.fc.Next()
}

// pattern returns n bytes that differ from those of any other (tag, offset),
// so an echo shifted by a byte or taken from another frame does not match.
func pattern(tag byte, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = tag<<5 ^ byte(i*7+1)
	}
	return p
}

// expectEchoes reads until the server has echoed every payload (its own DATA
// frames, numbered 1, 2, ...) and acknowledged them all, then checks that the
// connection is still open and clean: it acknowledges the echoes, pings, and
// requires the PONG with nothing but retransmissions before it.
func (w *wire) expectEchoes(deadline time.Time, payloads [][]byte) error {
	n := uint64(len(payloads))
	var echoed, acked uint64
	for echoed < n || acked < n {
		f, err := w.next(deadline)
		if err != nil {
			return fmt.Errorf("after %d of %d echoes and ACK %d: %w", echoed, n, acked, err)
		}
		switch f.Type {
		case frame.TypeData:
			switch {
			case f.Seq == echoed+1 && f.Seq <= n:
				if !bytes.Equal(f.Payload, payloads[echoed]) {
					return fmt.Errorf("echo %d is %x, want %x", f.Seq, f.Payload, payloads[echoed])
				}
				echoed++
			case f.Seq > echoed+1 || f.Seq > n:
				return fmt.Errorf("echo numbered %d after %d of %d", f.Seq, echoed, n)
			}
		case frame.TypeAck:
			if f.Seq > n {
				return fmt.Errorf("ACK %d of DATA never sent (%d sent)", f.Seq, n)
			}
			acked = max(acked, f.Seq)
		case frame.TypeClose:
			return fmt.Errorf("CLOSE %v %q after %d of %d echoes and ACK %d", f.Code, f.Reason, echoed, n, acked)
		default:
			return fmt.Errorf("unexpected %v after %d of %d echoes", f.Type, echoed, n)
		}
	}
	const nonce = 0x5e6
	if _, err := w.c.Write(frame.AppendPing(frame.AppendAck(nil, n), nonce)); err != nil {
		return fmt.Errorf("ACK and PING after the echoes: %w", err)
	}
	for {
		f, err := w.next(deadline)
		if err != nil {
			return fmt.Errorf("waiting for PONG after the echoes: %w", err)
		}
		switch {
		case f.Type == frame.TypePong && f.Nonce == nonce:
			return nil
		case f.Type == frame.TypeData && f.Seq <= n: // a retransmission sent before our ACK arrived
		default:
			return fmt.Errorf("waiting for PONG after the echoes: got %v code=%v seq=%d", f.Type, f.Code, f.Seq)
		}
	}
}

// TestFramed_EverySplitPoint writes three DATA frames as two writes, cut at
// every byte boundary in turn, each cut on a connection of its own, with a
// pause between the writes so the server reads them separately. Every cut
// must give back the three payloads, byte for byte, and an ACK, and leave the
// connection open. A server that forgets a partial frame fails at every cut
// inside it.
func TestFramed_EverySplitPoint(t *testing.T) {
	s := start(t, framedCfg(), nil)
	// The first frame is the longest, so most cuts fall inside a frame that
	// nothing before it in the read has completed.
	payloads := [][]byte{pattern(1, 23), pattern(2, 1), pattern(3, 6)}
	var stream []byte
	for i, p := range payloads {
		stream = frame.AppendData(stream, uint64(i+1), p)
	}
	const (
		pause    = 3 * time.Millisecond // between the two writes of a cut
		parallel = 16                   // connections at once
		timeout  = 2 * time.Second      // per connection
	)
	errs := make([]error, len(stream)) // by cut; errs[0] unused
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for k := 1; k < len(stream); k++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[k] = echoSplit(s.Addr().String(), stream[:k], stream[k:], pause, timeout, payloads)
		})
	}
	wg.Wait()
	var failed []string
	for k, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("cut after byte %d: %v", k, err))
		}
	}
	assert.Empty(t, failed, "%d of %d cuts of a %d-byte stream (frames of %d, %d and %d bytes) broke; first:\n%s",
		len(failed), len(stream)-1, len(stream), frame.DataHeaderSize+len(payloads[0]),
		frame.DataHeaderSize+len(payloads[1]), frame.DataHeaderSize+len(payloads[2]),
		strings.Join(failed[:min(len(failed), 5)], "\n"))
}

// echoSplit sends first, then after pause second, on a new connection, and
// checks the echoes of payloads.
func echoSplit(addr string, first, second []byte, pause, timeout time.Duration, payloads [][]byte) error {
	w, err := dialWire(addr, frame.DefaultMax)
	if err != nil {
		return err
	}
	defer w.c.Close()
	deadline := time.Now().Add(timeout)
	if err := w.c.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := w.c.Write(first); err != nil {
		return err
	}
	time.Sleep(pause) // pacing the writer, not waiting for a timer
	if _, err := w.c.Write(second); err != nil {
		return err
	}
	return w.expectEchoes(deadline, payloads)
}

// TestFramed_OneBytePerWrite sends two DATA frames and a PING one byte per
// write, each byte its own segment: the server must reassemble all three.
func TestFramed_OneBytePerWrite(t *testing.T) {
	s := start(t, framedCfg(), nil)
	w, err := dialWire(s.Addr().String(), frame.DefaultMax)
	require.NoError(t, err)
	t.Cleanup(func() { w.c.Close() })
	payloads := [][]byte{{'a'}, []byte("one byte at a time")}
	const nonce = 77
	var stream []byte
	for i, p := range payloads {
		stream = frame.AppendData(stream, uint64(i+1), p)
	}
	stream = frame.AppendPing(stream, nonce)
	deadline := time.Now().Add(3 * time.Second)
	require.NoError(t, w.c.SetWriteDeadline(deadline))
	for i := range stream {
		_, err := w.c.Write(stream[i : i+1])
		require.NoError(t, err, "byte %d of %d", i, len(stream))
		time.Sleep(time.Millisecond) // pacing, so the server reads bytes one by one
	}
	var echoes [][]byte
	var acked uint64
	pong := false
	for len(echoes) < len(payloads) || acked < uint64(len(payloads)) || !pong {
		f, err := w.next(deadline)
		require.NoError(t, err, "after %d echoes, ACK %d, pong %v", len(echoes), acked, pong)
		switch f.Type {
		case frame.TypeData:
			require.Equal(t, uint64(len(echoes)+1), f.Seq, "the server numbers its DATA 1, 2")
			echoes = append(echoes, bytes.Clone(f.Payload))
		case frame.TypeAck:
			acked = f.Seq
		case frame.TypePong:
			assert.Equal(t, uint64(nonce), f.Nonce)
			pong = true
		default:
			require.Failf(t, "unexpected frame", "%v code=%v reason=%q", f.Type, f.Code, f.Reason)
		}
	}
	assert.Equal(t, payloads, echoes)
	assert.Equal(t, uint64(len(payloads)), acked)
	assert.Empty(t, s.Stats().Closed, "the server closed no connection")
}

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
		timeout  = 6 * time.Second
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
			results[run] = randomSplitRun(s.Addr().String(), rng, payloads, maxFrame, timeout)
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
func randomSplitRun(addr string, rng *rand.Rand, payloads [][]byte, maxFrame int, timeout time.Duration) (r splitResult) {
	began := time.Now()
	defer func() { r.took = time.Since(began) }()
	r.frames = len(payloads)
	var want []byte
	for _, p := range payloads {
		want = append(want, p...)
	}
	r.sent = len(want)
	w, err := dialWire(addr, maxFrame)
	if err != nil {
		r.err = err
		return r
	}
	defer w.c.Close()
	deadline := time.Now().Add(timeout)
	if err := w.c.SetWriteDeadline(deadline); err != nil {
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
		if _, err := w.c.Write(frame.AppendPing(nil, nonce)); err != nil {
			r.err = fmt.Errorf("PING after the echoes: %w", err)
			return r
		}
		for {
			f, err := w.next(deadline)
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
	w        *wire
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
		f, err := sw.w.next(deadline)
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
		_, err := sw.w.c.Write(b)
		return err
	}
	for i := range b {
		sw.writes++
		sw.oneByte++
		if _, err := sw.w.c.Write(b[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

// TestFramed_Slowloris: the frame deadline runs from a frame's first byte,
// however the frame is trickled, and the server keeps every trickled byte
// until then. A server that drops a partial frame fails both ways: the
// trickled frame that completes in time is never echoed, and the rest of a
// frame whose header was dropped is read as a new, malformed header.
func TestFramed_Slowloris(t *testing.T) {
	const (
		frameTimeout = 300 * time.Millisecond
		slack        = 200 * time.Millisecond // late close: a tick, scheduling, -race
	)
	newServer := func(t *testing.T) *netserver.Server {
		cfg := framedCfg()
		cfg.Timeouts = idle.Config{FrameTimeout: frameTimeout}
		return start(t, cfg, nil)
	}

	// Each case has a server of its own, for exact close counts; they run
	// at once, to share the servers' shutdown time.
	t.Run("a frame trickled in time is echoed intact", func(t *testing.T) {
		t.Parallel()
		s := newServer(t)
		c := dial(t, s)
		require.NoError(t, c.c.(*net.TCPConn).SetNoDelay(true))
		payload := pattern(4, 8)
		full := frame.AppendData(nil, 1, payload)
		const every = 4 * time.Millisecond
		require.Less(t, time.Duration(len(full))*every, frameTimeout/3, "the trickle completes well in time")
		first := time.Now()
		for i := range full {
			if i > 0 {
				time.Sleep(every) // pacing the trickle
			}
			c.write(full[i : i+1])
		}
		var echo []byte
		acked := false
		for echo == nil || !acked {
			f, err := c.next(2 * time.Second)
			require.NoError(t, err, "waiting for the echo and ACK of the trickled frame")
			switch f.Type {
			case frame.TypeAck:
				assert.Equal(t, uint64(1), f.Seq)
				acked = true
			case frame.TypeData:
				assert.Equal(t, uint64(1), f.Seq)
				echo = f.Payload
			default:
				require.Failf(t, "the trickled frame was not echoed", "got %v code=%v reason=%q after %v",
					f.Type, f.Code, f.Reason, time.Since(first).Round(time.Millisecond))
			}
		}
		assert.Equal(t, payload, echo, "every trickled byte was kept")
		// The completed frame cleared its deadline: the connection outlives it.
		c.write(frame.AppendAck(nil, 1))
		f, err := c.next(max(time.Until(first.Add(frameTimeout+slack)), 50*time.Millisecond))
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "got %v (%v code=%v) after a completed frame", err, f.Type, f.Code)
		assert.Empty(t, s.Stats().Closed)
	})

	for _, tc := range []struct {
		name  string
		first int           // bytes in the first write
		piece int           // bytes in each later write
		every time.Duration // between writes
	}{
		// Each byte arriving must not push the deadline back.
		{name: "one byte per write", first: 1, piece: 1, every: 20 * time.Millisecond},
		// The header arrives whole, then the zero payload in pieces: read as
		// a header of its own, a piece is a zero-length frame, a protocol
		// error.
		{name: "header then payload pieces", first: frame.DataHeaderSize, piece: 8, every: 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			c := dial(t, s)
			require.NoError(t, c.c.(*net.TCPConn).SetNoDelay(true))
			full := frame.AppendData(nil, 1, make([]byte, 100))
			sendable := full[:len(full)-1] // never complete, however slow the server
			require.Greater(t, time.Duration((len(sendable)-tc.first)/tc.piece)*tc.every, frameTimeout+slack,
				"the trickle outlasts the deadline")
			firstAt := time.Now()
			c.write(sendable[:tc.first])
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				tick := time.NewTicker(tc.every)
				defer tick.Stop()
				for i := tc.first; i < len(sendable); i += tc.piece {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := c.c.Write(sendable[i:min(i+tc.piece, len(sendable))]); err != nil {
						return
					}
				}
			})
			frames, closedAt, err := readUntilClosed(c, 5*time.Second)
			close(stop)
			wg.Wait()
			require.NoError(t, err)
			var got []string
			for _, f := range frames {
				got = append(got, fmt.Sprintf("%v %v", f.Type, f.Code))
			}
			assert.Equal(t, []string{"close frame_deadline"}, got, "the server's frames before it closed")
			took := closedAt.Sub(firstAt)
			assert.GreaterOrEqual(t, took, frameTimeout, "closed before the frame deadline")
			assert.Less(t, took, frameTimeout+slack, "closed too long after the frame deadline")
			require.Eventually(t, func() bool { return s.Stats().Open == 0 }, 2*time.Second, time.Millisecond)
			assert.Equal(t, map[string]int64{"frame_deadline": 1}, s.Stats().Closed)
		})
	}
}

// readUntilClosed reads the server's frames until it closes the connection,
// and returns them and when the close was seen.
func readUntilClosed(c *client, timeout time.Duration) ([]frame.Frame, time.Time, error) {
	var frames []frame.Frame
	for {
		f, err := c.next(timeout)
		if errors.Is(err, io.EOF) || isReset(err) {
			return frames, time.Now(), nil
		}
		if err != nil {
			return frames, time.Now(), fmt.Errorf("waiting for the server to close, after %d frames: %w", len(frames), err)
		}
		frames = append(frames, f)
	}
}
