package netserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
)

func TestStart_EventLoopsAndSpareP(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name      string
		loops     int
		wantLoops int
		wantWarn  bool
	}{
		{name: "default leaves a P spare", loops: 0, wantLoops: max(1, procs-1), wantWarn: procs == 1},
		{name: "a loop on every P", loops: procs, wantLoops: procs, wantWarn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			var mu sync.Mutex
			cfg := netserver.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))}
			cfg.EventLoops = tc.loops
			s, err := netserver.New(cfg, netserver.Echo{})
			require.NoError(t, err)
			assert.Zero(t, s.EventLoops(), "not started")
			require.NoError(t, s.Start())
			defer func() { assert.NoError(t, s.Shutdown(context.Background())) }()
			assert.Equal(t, tc.wantLoops, s.EventLoops())
			mu.Lock()
			out := logs.String()
			mu.Unlock()
			assert.Contains(t, out, fmt.Sprintf(`"event_loops":%d`, tc.wantLoops))
			if tc.wantWarn {
				assert.Contains(t, out, "no P to spare")
			} else {
				assert.NotContains(t, out, "no P to spare")
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
