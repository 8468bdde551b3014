package attack

import (
	"context"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver/frame"
)

// A sender paused (as a stopped process is) catches up in one large batch.
// When that write fails part way, the part that went out was sent: its
// echoes come back, and they never outnumber the messages counted as sent.
// The server here echoes the first 64 KiB, stops reading, and resets the
// connection while the 32 MB catch-up batch is still being written.
// Framed, the echoes are the client's own DATA frames sent back.
func TestRun_EchoCountsAFailedCatchUpBatch(t *testing.T) {
	for _, p := range []Proto{Raw, Framed} {
		t.Run("proto="+p.String(), func(t *testing.T) { testFailedCatchUpBatch(t, p) })
	}
}

func testFailedCatchUpBatch(t *testing.T, proto Proto) {
	noLeak(t)
	const echoed = 64 << 10
	addr := serveEach(t, func(c net.Conn) {
		buf := make([]byte, echoed)
		n := 0
		for n < echoed {
			k, err := c.Read(buf[n:])
			n += k
			if err != nil {
				return
			}
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
		time.Sleep(300 * time.Millisecond) // the client's write blocks on full buffers meanwhile
		_ = c.(*net.TCPConn).SetLinger(0)  // the close resets: the blocked write fails
	})
	var once sync.Once
	testPauseSender = func(uint64) { once.Do(func() { time.Sleep(500 * time.Millisecond) }) }
	t.Cleanup(func() { testPauseSender = nil })

	cfg := Config{Addr: addr, Proto: proto, Scenarios: []string{scenario.Echo}, Conns: map[string]int{scenario.Echo: 1},
		Rate: 1e6, Size: 64, Duration: 2 * time.Second, AnswerWait: time.Second, Timeouts: report.Timeouts{Slack: 100 * time.Millisecond}}
	var got []report.ConnResult
	var ctr Counters
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Run(ctx, cfg, &ctr, func(r report.ConnResult) { got = append(got, r) })
	require.NoError(t, err)
	require.Len(t, got, 1)
	r := got[0]
	require.Equal(t, "write", r.Err, "the catch-up batch's write failed (ended %s)", r.End)
	if proto == Raw {
		assert.Equal(t, uint64(echoed/64), r.Recv, "the server echoed 64 KiB")
	} else {
		// The reader's ACKs wait behind the batch's write, so it stops
		// short of the echoes' end.
		assert.Positive(t, r.Recv)
		assert.LessOrEqual(t, r.Recv, uint64(echoed/(64+frame.DataHeaderSize)))
	}
	assert.LessOrEqual(t, r.Recv, r.Sent, "echoed never exceeds sent")
	assert.Less(t, r.Sent, uint64(250_000), "the batch did not all go out")
	assert.Equal(t, int64(r.Sent), ctr.Sent.Load(), "the live counter agrees")
	assert.Equal(t, r.Sent-r.Recv, r.Lost)
}
