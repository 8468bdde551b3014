package netserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
)

// TestConfig_WithDefaultsResolvesToItself: what WithDefaults returns is a
// Config New accepts and WithDefaults returns unchanged, so an embedder
// may resolve a Config (to log it, say) and run the result.
func TestConfig_WithDefaultsResolvesToItself(t *testing.T) {
	tests := []struct {
		name string
		cfg  netserver.Config
	}{
		{name: "zero", cfg: netserver.Config{}},
		{name: "framed", cfg: netserver.Config{Protocol: netserver.Framed}},
		{name: "hard output limit below the default soft one", cfg: netserver.Config{Limits: netserver.Limits{OutputHard: 512 << 10}}},
		{name: "framed, hard output limit below the default soft one", cfg: netserver.Config{Protocol: netserver.Framed,
			Limits: netserver.Limits{OutputHard: 512 << 10}}},
		{name: "hard output limit at the default soft one", cfg: netserver.Config{Limits: netserver.Limits{OutputHard: netserver.DefaultOutputSoft}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.cfg.WithDefaults()
			require.NoError(t, err)
			again, err := r.WithDefaults()
			require.NoError(t, err, "the resolved Config refused")
			assert.Equal(t, r, again)
			r.Addr = "127.0.0.1:0"
			_, err = netserver.New(r, netserver.Echo{})
			assert.NoError(t, err, "New of the resolved Config")
		})
	}
}
