package frame_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/netserver/frame"
)

// TestConn_GoAwayDrainsOverALongLink: over a link of 100 ms round trip
// (testnet's proxy, 50 ms each way), a client keeps sending 50 DATA a
// second until the server's GOAWAY stops it, so that about five are in
// flight when it comes (two at least: DATA 10, which draws it, goes with 11
// and 12 back to back). The scripted server echoes
// everything that arrives, also after its GOAWAY, and ends with CLOSE once
// the client's GOAWAY has come and every echo is acknowledged. Every DATA
// the client sent is echoed and acknowledged, nothing is refused but what
// started after the GOAWAY, and the drain takes at least a round trip
// (never early) and well under a 5 s grace.
func TestConn_GoAwayDrainsOverALongLink(t *testing.T) {
	type result struct {
		drain       time.Duration // from the GOAWAY's write to the client's answer
		received    uint64        // DATA the server received
		answerLast  uint64        // the client's GOAWAY's last DATA
		acked       uint64
		dataAfterGA bool // a DATA from the client after its GOAWAY
		err         error
	}
	done := make(chan result, 1)
	addr := testnet.Serve(t, func(srv net.Conn, _ uint64) {
		var r result
		defer func() { done <- r }()
		_ = srv.SetDeadline(time.Now().Add(20 * time.Second))
		peer := newPeerReader(srv)
		var sentAway time.Time
		answered := false
		for !answered || r.acked < r.received {
			f, err := peer.next()
			if err != nil {
				r.err = err
				return
			}
			switch f.Type {
			case frame.TypeData:
				if answered {
					r.dataAfterGA = true
				}
				r.received = f.Seq
				out := frame.AppendData(nil, f.Seq, f.Payload)
				if f.Seq == 10 { // busy: the notice comes with the tenth echo
					out = frame.AppendGoAway(out, frame.CodeShutdown, f.Seq, 5*time.Second, "shutting down")
					sentAway = time.Now()
				}
				if _, err := srv.Write(out); err != nil {
					r.err = err
					return
				}
			case frame.TypeAck:
				r.acked = f.Seq
			case frame.TypeGoAway:
				answered = true
				r.drain = time.Since(sentAway)
				r.answerLast = f.Seq
			}
		}
		_, r.err = srv.Write(frame.AppendClose(nil, frame.CodeShutdown, "drained"))
	})
	const oneWay = 50 * time.Millisecond
	p, err := testnet.Listen(testnet.Config{Target: addr, Delay: oneWay, Jitter: 5 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()

	nc, err := net.Dial("tcp", p.Addr().String())
	require.NoError(t, err)
	c := frame.NewConn(nc, 0)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(20*time.Second)))

	sent := make(chan uint64, 1)
	go func() {
		var last uint64
		defer func() { sent <- last }()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			seq, err := c.Send([]byte{byte(i)})
			if err != nil {
				if !errors.Is(err, frame.ErrGoingAway) {
					t.Errorf("send %d: %v", i, err)
				}
				return
			}
			last = seq
			// DATA 10 to 12 go back to back: 11 and 12 are in flight when
			// the GOAWAY that DATA 10 draws comes, a round trip later.
			if seq < 10 || seq >= 12 {
				<-tick.C
			}

		}
	}()
	var echoes uint64
	var err2 error
	for {
		var p []byte
		p, err2 = c.Recv()
		if err2 != nil {
			break
		}
		echoes++
		require.Equal(t, byte(echoes-1), p[0], "echo %d", echoes)
	}
	var ce *frame.CloseError
	require.True(t, errors.As(err2, &ce), "got %v", err2)
	assert.Equal(t, frame.CodeShutdown, ce.Code)
	last := <-sent
	r := <-done
	require.NoError(t, r.err)
	assert.False(t, r.dataAfterGA, "DATA after the client's GOAWAY")
	assert.Equal(t, last, r.answerLast, "the answer names the last DATA sent")
	assert.Equal(t, last, r.received)
	assert.Equal(t, last, echoes, "every DATA sent was echoed")
	assert.Equal(t, last, r.acked, "and every echo acknowledged")
	assert.GreaterOrEqual(t, last, uint64(12), "DATA was in flight when the GOAWAY came")
	assert.GreaterOrEqual(t, r.drain, 2*oneWay, "an answer before a round trip")
	assert.Less(t, r.drain, 5*time.Second, "within the grace, loosely")
	t.Logf("sent %d, drained %v after the GOAWAY", last, r.drain)
}
