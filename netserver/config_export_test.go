package netserver

import "github.com/netwheel/netwheel/idle"

// Resolve is c as New runs it, validated, or New's configuration error.
func Resolve(c Config) (Config, error) {
	return c.resolve()
}

// TrackerConfig is the idle.Config the server's connections are tracked
// with.
func (s *Server) TrackerConfig() idle.Config { return s.idleCfg }
