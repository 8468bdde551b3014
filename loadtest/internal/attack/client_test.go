package attack

import (
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/netserver/frame"
)

// The echo role's hot path, framed, through frame.Conn: messages sent in a
// batch, their echoes read, acknowledged and timed into the histogram,
// costs no allocation once the buffers have grown. The raw echo server
// sends the client's frames back as they are: its DATA as the echo, its
// ACKs as ACKs.
func TestClient_EchoPathAllocationFree(t *testing.T) {
	noLeak(t)
	c, err := net.Dial("tcp", startEchoServer(t, nil))
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
		_, err := cl.send(payload, 3)
		require.NoError(t, err)
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

// TestClient_BadServerFrameIsNotAServerClose: bytes from the server that
// are no frame end the connection on the client's side. That is named
// bad_server_frame, not the protocol_error a server's CLOSE frame says,
// and does not count as the server closing.
func TestClient_BadServerFrameIsNotAServerClose(t *testing.T) {
	noLeak(t)
	tests := []struct {
		name string
		send []byte
	}{
		{name: "unknown type", send: garbage(rand.New(rand.NewPCG(1, 2)), scenario.GarbageBadType, 64)},
		{name: "too large", send: garbage(rand.New(rand.NewPCG(1, 2)), scenario.GarbageHugeLength, 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli := net.Pipe()
			defer srv.Close()
			ctr := &Counters{}
			ctr.opened()
			cl := newClient(cli, Framed, ctr)
			go cl.read()
			go func() { _, _ = srv.Write(tt.send) }()
			select {
			case <-cl.done:
			case <-time.After(5 * time.Second):
				t.Fatal("the reader did not give up on the bad frame")
			}
			assert.Equal(t, report.EndBadServerFrame, cl.end)
			assert.False(t, cl.closedByServer(), "the client gave up: the server closed nothing")
			assert.Equal(t, int64(1), ctr.Errors.Load())
		})
	}
}
