package netserver_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
)

func TestMain(m *testing.M) {
	if os.Getenv(floodChildEnv) != "" {
		os.Exit(floodChild())
	}
	goleak.VerifyTestMain(m,
		// gnet's shared worker pool (ants) keeps a purge goroutine for the
		// life of the process; it is not ours and not per server.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

// waitFor bounds a wait for something that must come (a frame, a count):
// it detects a hang and measures nothing. A machine whose other processes
// take the CPU may keep a test from running for seconds, so it is long; a
// test that passes does not wait it out.
const waitFor = 10 * time.Second

// start runs a server for the test and shuts it down at the end.
func start(t testing.TB, cfg netserver.Config, h netserver.ConnHandler) *netserver.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.EventLoops == 0 {
		cfg.EventLoops = 2
	}
	if h == nil {
		h = netserver.Echo{}
	}
	s, err := netserver.New(cfg, h)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, s.Shutdown(ctx))
	})
	return s
}

// dial connects a testpeer to s.
func dial(t *testing.T, s *netserver.Server) *testpeer.Peer {
	t.Helper()
	return dialMax(t, s, 0)
}

// dialMax is dial for a peer that accepts frames of length up to max (0:
// frame.DefaultMax).
func dialMax(t *testing.T, s *netserver.Server, max int) *testpeer.Peer {
	t.Helper()
	p, err := testpeer.Dial(t, s.Addr().String(), max)
	require.NoError(t, err)
	return p
}
