package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netwheel/netwheel/netserver"
)

// The startup line reports the keepalive the kernel will use: gnet's
// interval and count when only the idle time is set, not "system".
func TestKeepaliveReport(t *testing.T) {
	for _, tc := range []struct {
		name         string
		k            netserver.KernelConfig
		wantInterval string
		wantCount    string
	}{
		{name: "off", wantInterval: "system", wantCount: "system"},
		{name: "idle only", k: netserver.KernelConfig{KeepaliveIdle: 10 * time.Second}, wantInterval: "2s", wantCount: "5"},
		{name: "all set", k: netserver.KernelConfig{KeepaliveIdle: 10 * time.Second, KeepaliveInterval: 3 * time.Second, KeepaliveCount: 4},
			wantInterval: "3s", wantCount: "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			interval, count := tcpKeepalive(tc.k)
			assert.Equal(t, tc.wantInterval, interval)
			assert.Equal(t, tc.wantCount, count)
		})
	}
}
