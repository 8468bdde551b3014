package netserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netwheel/netwheel/netserver"
)

// TestSourceLimit_LoopbackNotCounted: a loopback peer without a PROXY
// header is not counted against a source's limit, IPv6's ::1 as IPv4's
// 127.0.0.1, whatever the source prefixes (::1's /64 is ::/64, which is
// not loopback).
func TestSourceLimit_LoopbackNotCounted(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run("addr="+addr, func(t *testing.T) {
			s := start(t, netserver.Config{Addr: addr, Protocol: netserver.Raw, MaxConnsPerSource: 1}, nil)
			for range 3 {
				c := dial(t, s)
				c.Push([]byte("ok"))
				assert.Equal(t, []byte("ok"), readEcho(t, c, netserver.Raw, 2), "loopback is not counted")
			}
			assert.Zero(t, s.Stats().Closed["source_limit"])
		})
	}
}
