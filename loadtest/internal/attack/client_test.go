package attack

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver/frame"
)

// The echo role's hot path, framed, through frame.Conn: messages sent in a
// batch, their echoes read, acknowledged and timed into the histogram,
// costs no allocation once the buffers have grown. The raw echo server
// sends the client's frames back as they are: its DATA as the echo, its
// ACKs as ACKs.
func TestClient_EchoPathAllocationFree(t *testing.T) {
	noLeak(t)
	srv := startEchoServer(t, nil)
	c, err := net.Dial("tcp", srv.ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	ctr := &Counters{}
	ctr.opened()
	cl := newClient(c, Framed, ctr)
	cl.replies(frame.ReplyAll)
	start := time.Now()
	e := newEchoes(&recorder{}, 256, func(_ uint64, at time.Time) int64 { return int64(at.Sub(start)) })
	cl.onEcho = e.onEcho
	go cl.read()
	defer cl.shut()

	payload := make([]byte, 64)
	var sent uint64
	roundTrip := func() {
		require.NoError(t, cl.send(payload, 3))
		sent += 3
		for e.recv.Load() < sent {
			select {
			case <-e.got:
			case <-cl.done:
				t.Fatalf("the connection ended: %s", cl.end)
			}
		}
	}
	for range 300 {
		roundTrip()
	}
	assert.Zero(t, testing.AllocsPerRun(300, roundTrip))
}
