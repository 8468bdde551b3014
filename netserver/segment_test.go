package netserver_test

// Tests that the framed protocol does not depend on how TCP cuts the inbound
// byte stream: a decoder must keep a partial frame until the rest
// arrives, and never assume that one read is one frame.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// pattern returns n bytes that differ from those of any other (tag, offset),
// so an echo shifted by a byte or taken from another frame does not match.
func pattern(tag byte, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = tag<<5 ^ byte(i*7+1)
	}
	return p
}

// expectEchoes reads from w until the server has echoed every payload (its
// own DATA frames, numbered 1, 2, ...) and acknowledged them all, then checks
// that the connection is still open and clean: it acknowledges the echoes,
// pings, and requires the PONG with nothing but retransmissions before it.
// It fails no test, so any goroutine may call it.
func expectEchoes(w *testpeer.Peer, deadline time.Time, payloads [][]byte) error {
	n := uint64(len(payloads))
	var echoed, acked uint64
	for echoed < n || acked < n {
		f, err := w.Next(time.Until(deadline))
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
	if _, err := w.Write(frame.AppendPing(frame.AppendAck(nil, n), nonce)); err != nil {
		return fmt.Errorf("ACK and PING after the echoes: %w", err)
	}
	for {
		f, err := w.Next(time.Until(deadline))
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
			errs[k] = echoSplit(t, s.Addr().String(), stream[:k], stream[k:], pause, timeout, payloads)
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
// checks the echoes of payloads. It fails no test.
func echoSplit(t *testing.T, addr string, first, second []byte, pause, timeout time.Duration, payloads [][]byte) error {
	w, err := testpeer.Dial(t, addr, 0)
	if err != nil {
		return err
	}
	defer w.Close()
	deadline := time.Now().Add(timeout)
	if err := w.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := w.Write(first); err != nil {
		return err
	}
	time.Sleep(pause) // pacing the writer, not waiting for a timer
	if _, err := w.Write(second); err != nil {
		return err
	}
	return expectEchoes(w, deadline, payloads)
}

// TestFramed_OneBytePerWrite sends two DATA frames and a PING one byte per
// write, each byte its own segment: the server must reassemble all three.
func TestFramed_OneBytePerWrite(t *testing.T) {
	s := start(t, framedCfg(), nil)
	w := dial(t, s)
	payloads := [][]byte{{'a'}, []byte("one byte at a time")}
	const nonce = 77
	var stream []byte
	for i, p := range payloads {
		stream = frame.AppendData(stream, uint64(i+1), p)
	}
	stream = frame.AppendPing(stream, nonce)
	deadline := time.Now().Add(3 * time.Second)
	require.NoError(t, w.SetWriteDeadline(deadline))
	for i := range stream {
		_, err := w.Write(stream[i : i+1])
		require.NoError(t, err, "byte %d of %d", i, len(stream))
		time.Sleep(time.Millisecond) // pacing, so the server reads bytes one by one
	}
	var echoes [][]byte
	var acked uint64
	pong := false
	for len(echoes) < len(payloads) || acked < uint64(len(payloads)) || !pong {
		f, err := w.Next(time.Until(deadline))
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
		// The trickle takes a few milliseconds of sleeps; on a machine
		// whose other processes take the CPU it may take longer than the
		// deadline, and then the server is right to close. Such an attempt
		// proves nothing here: it is retried, a few times at most.
		for attempt := 1; ; attempt++ {
			if trickleInTime(t, newServer(t), frameTimeout) {
				return
			}
			require.Less(t, attempt, 5, "the trickle never completed within the frame timeout: the machine is too busy")
			t.Logf("attempt %d: the trickle took longer than the frame timeout; again", attempt)
		}
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
			full := frame.AppendData(nil, 1, make([]byte, 100))
			sendable := full[:len(full)-1] // never complete, however slow the server
			require.Greater(t, time.Duration((len(sendable)-tc.first)/tc.piece)*tc.every, frameTimeout+slack,
				"the trickle outlasts the deadline")
			lag := lagmeter.New(t)
			firstAt := time.Now()
			c.Push(sendable[:tc.first])
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
					if _, err := c.Write(sendable[i:min(i+tc.piece, len(sendable))]); err != nil {
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
			assert.Less(t, took, frameTimeout+lag.Slack(slack), "closed too long after the frame deadline")
			require.Eventually(t, func() bool { return s.Stats().Open == 0 }, waitFor, time.Millisecond)
			assert.Equal(t, map[string]int64{"frame_deadline": 1}, s.Stats().Closed)
		})
	}
}

// readUntilClosed reads the server's frames until it closes the connection,
// and returns them and when the close was seen.
func readUntilClosed(c *testpeer.Peer, timeout time.Duration) ([]frame.Frame, time.Time, error) {
	var frames []frame.Frame
	for {
		f, err := c.Next(timeout)
		if testpeer.Closed(err) {
			return frames, time.Now(), nil
		}
		if err != nil {
			return frames, time.Now(), fmt.Errorf("waiting for the server to close, after %d frames: %w", len(frames), err)
		}
		frames = append(frames, f)
	}
}

// trickleInTime trickles one frame to s a byte at a time, well within
// frameTimeout, and checks it is echoed intact and acknowledged, and that
// the connection then outlives the frame's deadline. It returns false,
// having checked nothing more, when the server closed the connection for
// its frame deadline and this process lost enough time for that to be the
// machine's doing: the trickle ended late, or the server may not have read
// the last byte before the deadline.
func trickleInTime(t *testing.T, s *netserver.Server, frameTimeout time.Duration) bool {
	t.Helper()
	lag := lagmeter.New(t)
	c := dial(t, s)
	payload := pattern(4, 8)
	full := frame.AppendData(nil, 1, payload)
	const every = 4 * time.Millisecond
	require.Less(t, time.Duration(len(full))*every, frameTimeout/3, "the trickle completes well in time")
	first := time.Now()
	// late says whether this process was kept off the CPU long enough for a
	// close at the frame deadline to be the machine's doing.
	late := func(trickled time.Duration) bool {
		return trickled >= frameTimeout/2 || lag.Slack(trickled) >= frameTimeout
	}
	for i := range full {
		if i > 0 {
			time.Sleep(every) // pacing the trickle
		}
		if _, err := c.Write(full[i : i+1]); err != nil {
			if late(time.Since(first)) {
				t.Logf("closed during a trickle of %v, with %v lost to the machine: %v", time.Since(first), lag.Stalled(), err)
				return false
			}
			require.NoError(t, err, "closed during the trickle, at byte %d after %v", i, time.Since(first))
		}
	}
	trickled := time.Since(first)
	var echo []byte
	acked := false
	for echo == nil || !acked {
		f, err := c.Next(waitFor)
		if testpeer.Closed(err) && late(trickled) {
			t.Logf("closed after a trickle of %v, with %v lost to the machine", trickled, lag.Stalled())
			return false
		}
		require.NoError(t, err, "waiting for the echo and ACK of the trickled frame")
		switch f.Type {
		case frame.TypeAck:
			assert.Equal(t, uint64(1), f.Seq)
			acked = true
		case frame.TypeData:
			assert.Equal(t, uint64(1), f.Seq)
			echo = f.Payload
		default:
			if f.Type == frame.TypeClose && f.Code == frame.CodeFrameDeadline && late(trickled) {
				t.Logf("closed for its deadline after a trickle of %v, with %v lost to the machine", trickled, lag.Stalled())
				return false
			}
			require.Failf(t, "the trickled frame was not echoed", "got %v code=%v reason=%q after %v (trickle %v, lost %v)",
				f.Type, f.Code, f.Reason, time.Since(first).Round(time.Millisecond), trickled, lag.Stalled())
		}
	}
	assert.Equal(t, payload, echo, "every trickled byte was kept")
	// The completed frame cleared its deadline: the connection outlives it.
	c.Push(frame.AppendAck(nil, 1))
	f, err := c.Next(max(time.Until(first.Add(frameTimeout+200*time.Millisecond)), 50*time.Millisecond))
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "got %v (%v code=%v) after a completed frame", err, f.Type, f.Code)
	assert.Empty(t, s.Stats().Closed)
	return true
}
