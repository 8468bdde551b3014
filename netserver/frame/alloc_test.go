package frame_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testnet"
	"github.com/netwheel/netwheel/netserver/frame"
)

// A message sent and its echo received, acknowledged on arrival, cost no
// allocation once the buffers have grown: the load-test harness's hot
// path. The peer echoes the client's bytes as they are (its DATA come back
// as DATA in the same sequence, its ACKs as ACKs).
func TestConn_SendAndNextAllocationFree(t *testing.T) {
	addr := testnet.Serve(t, func(nc net.Conn, _ uint64) {
		_, _ = io.CopyBuffer(nc, struct{ io.Reader }{nc}, make([]byte, 32<<10))
	})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	c := frame.NewConn(nc, 0)
	payloads := [][]byte{make([]byte, 64), make([]byte, 64)}
	roundTrip := func() {
		_, err := c.SendAll(payloads...)
		require.NoError(t, err)
		for got := 0; got < len(payloads); {
			f, err := c.Next()
			require.NoError(t, err)
			if f.Type == frame.TypeData {
				got++
			}
		}
	}
	for range 100 {
		roundTrip()
	}
	assert.Zero(t, testing.AllocsPerRun(200, roundTrip))
	require.NoError(t, c.Close(frame.CodeNormal, ""))
}
