package netserver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestLoop_TakeExpiredInPostOrder checks that a loop acts on expired
// connections in the order the wheel posted them: under a burst the first
// due must not wait behind every later one.
func TestLoop_TakeExpiredInPostOrder(t *testing.T) {
	l := &loop{}
	conns := make([]*Conn, 5)
	for i := range conns {
		conns[i] = &Conn{l: l}
	}
	for _, c := range conns {
		c.post(evClose)
	}
	conns[2].post(evOutput) // already queued: no second entry
	var got []*Conn
	for c := l.takeExpired(); c != nil; c = c.next {
		got = append(got, c)
	}
	require.Len(t, got, len(conns))
	for i := range conns {
		assert.Same(t, conns[i], got[i], "position %d", i)
	}
	assert.Equal(t, evClose|evOutput, conns[2].pending.Load())
	assert.Nil(t, l.takeExpired(), "the list is empty once taken")
}

func TestCloseLevel(t *testing.T) {
	tests := []struct {
		name    string
		reasons []Reason
		want    slog.Level
	}{
		{name: "a normal end", want: slog.LevelDebug,
			reasons: []Reason{ReasonPeerClosed, ReasonIdle, ReasonMaxAge, ReasonServerClosed, ReasonShutdown, ReasonApplication}},
		{name: "a peer gone or too slow", want: slog.LevelInfo,
			reasons: []Reason{ReasonDeadPeer, ReasonKeepalive, ReasonFrameDeadline, ReasonHandshake, ReasonWriteStall, ReasonGiveUp}},
		{name: "a broken protocol, a limit or an error", want: slog.LevelWarn,
			reasons: []Reason{ReasonProtocol, ReasonTooLarge, ReasonOverload, ReasonPanic, ReasonError,
				ReasonOutputLimit, ReasonUnackedLimit, ReasonPingFlood}},
		{name: "a refusal at the edge, counted by the metrics (a PROXY header's is warned of where it is read)",
			want:    slog.LevelDebug,
			reasons: []Reason{ReasonSourceLimit, ReasonProxyUntrusted, ReasonProxyMissing, ReasonProxyInvalid, ReasonProxyTooLarge}},
	}
	listed := map[Reason]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range tt.reasons {
				listed[r] = true
				assert.Equal(t, tt.want, closeLevel(r, nil), r.String())
			}
		})
	}
	for _, r := range Reasons() {
		assert.True(t, listed[r], "%s: its level is not stated here", r)
	}
}

// A read or write error that only says the peer went away is routine, and
// logged at info; any other error at warn.
func TestCloseLevel_PeerGone(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want slog.Level
	}{
		{name: "reset by peer", err: os.NewSyscallError("read", unix.ECONNRESET), want: slog.LevelInfo},
		{name: "broken pipe", err: fmt.Errorf("write: %w", unix.EPIPE), want: slog.LevelInfo},
		{name: "timed out", err: unix.ETIMEDOUT, want: slog.LevelInfo},
		{name: "another errno", err: os.NewSyscallError("read", unix.EBADF), want: slog.LevelWarn},
		{name: "not an errno", err: errors.New("netserver: something else"), want: slog.LevelWarn},
		{name: "no error", err: nil, want: slog.LevelWarn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, closeLevel(ReasonError, tt.err))
		})
	}
	assert.Equal(t, slog.LevelDebug, closeLevel(ReasonPeerClosed, unix.ECONNRESET), "only ReasonError's level depends on the error")
}
