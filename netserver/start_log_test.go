package netserver_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
)

// TestStart_LogsTheEdge: the listening line says what the edge runs with,
// as it says max_conns: the per-source bound Start resolved ("none" when
// off) and the PROXY protocol's mode.
func TestStart_LogsTheEdge(t *testing.T) {
	tests := []struct {
		name      string
		cfg       netserver.Config
		perSource string
		proxy     string
	}{
		{name: "default", cfg: netserver.Config{MaxConns: 1000}, perSource: "100", proxy: "off"},
		{name: "given", cfg: netserver.Config{MaxConnsPerSource: 7, ProxyProtocol: netserver.ProxyRequired, TrustedProxies: loopback},
			perSource: "7", proxy: "required"},
		{name: "off", cfg: netserver.Config{MaxConnsPerSource: netserver.Off}, perSource: "none", proxy: "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, logs := newLogCapture()
			tt.cfg.Logger = log
			start(t, tt.cfg, nil)
			lines := logs.attrsOf("netserver: listening")
			require.Len(t, lines, 1)
			assert.Equal(t, tt.perSource, fmt.Sprint(lines[0]["max_conns_per_source"]))
			assert.Equal(t, tt.proxy, fmt.Sprint(lines[0]["proxy_protocol"]))
		})
	}
}
