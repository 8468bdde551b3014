//go:build unix

package idleconn_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netwheel/netwheel/idle"
)

// TestConn_ExpireKeepsZeroLinger: a linger of 0 does not block Close, and a
// timeout's close keeps it: the connection is reset, not closed gracefully.
func TestConn_ExpireKeepsZeroLinger(t *testing.T) {
	clk, _, sc, client := pair(t, only(idle.Config{IdleTimeout: time.Second}))
	assert.NoError(t, sc.SetLinger(0))
	clk.Advance(time.Second)
	_, err := client.Read(make([]byte, 1))
	assert.ErrorIs(t, err, syscall.ECONNRESET, "the peer saw a graceful close, not the reset a linger of 0 asks for")
}
