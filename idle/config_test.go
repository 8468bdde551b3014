package idle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
)

func TestConfig_Validate(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name    string
		cfg     idle.Config
		wantErr error  // nil: valid
		field   string // must appear in the message
	}{
		{name: "zero is valid, everything off", cfg: idle.Config{}},
		{name: "everything on", cfg: idle.Config{IdleTimeout: 5 * time.Minute, ReadSilenceTimeout: time.Minute,
			KeepaliveTime: 30 * s, KeepaliveTimeout: 10 * s, KeepaliveCount: 3, FrameTimeout: 10 * s,
			HandshakeTimeout: 5 * s, MaxAge: time.Hour, MaxAgeJitter: 6 * time.Minute, MaxAgeGrace: time.Minute,
			WriteStallTimeout: 30 * s}},
		{name: "negative idle", cfg: idle.Config{IdleTimeout: -s}, wantErr: idle.ErrNegative, field: "IdleTimeout"},
		{name: "negative read silence", cfg: idle.Config{ReadSilenceTimeout: -1}, wantErr: idle.ErrNegative, field: "ReadSilenceTimeout"},
		{name: "negative frame", cfg: idle.Config{FrameTimeout: -1}, wantErr: idle.ErrNegative, field: "FrameTimeout"},
		{name: "negative grace", cfg: idle.Config{MaxAge: s, MaxAgeGrace: -1}, wantErr: idle.ErrNegative, field: "MaxAgeGrace"},
		{name: "negative write stall", cfg: idle.Config{WriteStallTimeout: -1}, wantErr: idle.ErrNegative, field: "WriteStallTimeout"},
		{name: "negative count", cfg: idle.Config{KeepaliveTime: s, KeepaliveTimeout: s, KeepaliveCount: -1},
			wantErr: idle.ErrNegative, field: "KeepaliveCount"},
		{name: "keepalive timeout without time", cfg: idle.Config{KeepaliveTimeout: s},
			wantErr: idle.ErrKeepalive, field: "KeepaliveTimeout"},
		{name: "keepalive count without time", cfg: idle.Config{KeepaliveCount: 3},
			wantErr: idle.ErrKeepalive, field: "KeepaliveCount"},
		{name: "keepalive time without timeout", cfg: idle.Config{KeepaliveTime: s},
			wantErr: idle.ErrKeepalive, field: "KeepaliveTimeout"},
		{name: "probe never sent: read silence closes first", cfg: idle.Config{ReadSilenceTimeout: 10 * s,
			KeepaliveTime: 10 * s, KeepaliveTimeout: s}, wantErr: idle.ErrKeepalive, field: "ReadSilenceTimeout"},
		{name: "probe time just below read silence is fine", cfg: idle.Config{ReadSilenceTimeout: 10 * s,
			KeepaliveTime: 10*s - 1, KeepaliveTimeout: s}},
		{name: "keepalive time above idle is fine (pongs are not activity)", cfg: idle.Config{IdleTimeout: s,
			KeepaliveTime: 10 * s, KeepaliveTimeout: s}},
		{name: "jitter without max age", cfg: idle.Config{MaxAgeJitter: s}, wantErr: idle.ErrNoEffect, field: "MaxAgeJitter"},
		{name: "grace without max age", cfg: idle.Config{MaxAgeGrace: s}, wantErr: idle.ErrNoEffect, field: "MaxAgeGrace"},
		{name: "jitter not below max age", cfg: idle.Config{MaxAge: s, MaxAgeJitter: s}, wantErr: idle.ErrMaxAge, field: "MaxAgeJitter"},
		{name: "frame deadline beyond the longest life", cfg: idle.Config{MaxAge: 10 * s, MaxAgeJitter: s,
			MaxAgeGrace: s, FrameTimeout: 12 * s}, wantErr: idle.ErrNoEffect, field: "FrameTimeout"},
		{name: "frame deadline just inside the longest life", cfg: idle.Config{MaxAge: 10 * s, MaxAgeJitter: s,
			MaxAgeGrace: s, FrameTimeout: 12*s - 1}},
		{name: "idle beyond max age", cfg: idle.Config{MaxAge: 10 * s, IdleTimeout: time.Minute},
			wantErr: idle.ErrNoEffect, field: "IdleTimeout"},
		{name: "handshake beyond max age", cfg: idle.Config{MaxAge: 10 * s, HandshakeTimeout: 10 * s},
			wantErr: idle.ErrNoEffect, field: "HandshakeTimeout"},
		{name: "write stall beyond max age", cfg: idle.Config{MaxAge: 10 * s, WriteStallTimeout: 11 * s},
			wantErr: idle.ErrNoEffect, field: "WriteStallTimeout"},
		{name: "keepalive timeout may exceed max age", cfg: idle.Config{MaxAge: 10 * s, KeepaliveTime: s,
			KeepaliveTimeout: 20 * s}},
		{name: "huge values do not overflow", cfg: idle.Config{MaxAge: 1<<63 - 1, MaxAgeJitter: 1 << 62, MaxAgeGrace: 1 << 62,
			IdleTimeout: 1<<63 - 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.field)
			assert.Regexp(t, "^idle: ", err.Error())
		})
	}
}
