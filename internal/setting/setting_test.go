package setting

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOr(t *testing.T) {
	assert.Equal(t, 5*time.Second, Or(0, 5*time.Second), "zero is the default")
	assert.Equal(t, time.Duration(Off), Or(Off, 5*time.Second), "Off stays off")
	assert.Equal(t, 7, Or(7, 3))
	assert.Equal(t, 3, Unless(true, 3))
	assert.Equal(t, Off, Unless(false, 3))
	assert.Equal(t, math.MaxInt, Bound(Off))
	assert.Equal(t, 0, Bound(0))
	assert.Equal(t, 9, Bound(9))
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		mention string
	}{
		{name: "zero", err: Check("IdleTimeout", time.Duration(0))},
		{name: "off", err: Check("IdleTimeout", time.Duration(Off))},
		{name: "positive", err: Check("MaxConns", 5)},
		{name: "typo", err: Check("IdleTimeout", -5*time.Second), mention: "IdleTimeout -5s is negative: 0 means the default, -1 (Off) turns it off"},
		{name: "negative count", err: Check("MaxConns", -5), mention: "MaxConns -5 is negative"},
		{name: "on zero", err: CheckOn("Window", 0)},
		{name: "on off", err: CheckOn("Window", Off), mention: "Window -1 is negative: 0 means the default, and it cannot be off"},
		{name: "tick off", err: CheckTick("FrameTimeout", Off, time.Millisecond)},
		{name: "tick zero", err: CheckTick("FrameTimeout", 0, time.Millisecond)},
		{name: "tick equal", err: CheckTick("FrameTimeout", time.Millisecond, time.Millisecond)},
		{name: "addr", err: CheckAddr("Addr", "127.0.0.1:0")},
		{name: "addr by service", err: CheckAddr("Addr", ":http")},
		{name: "addr empty", err: CheckAddr("Addr", ""), mention: "Addr is empty: want host:port"},
		{name: "addr without port", err: CheckAddr("-metrics", "bad"), mention: `-metrics "bad": address bad: missing port in address`},
		{name: "addr port out of range", err: CheckAddr("Addr", "127.0.0.1:99999"), mention: `Addr "127.0.0.1:99999": address 99999: invalid port`},
		{name: "below tick", err: CheckTick("FrameTimeout", time.Nanosecond, time.Millisecond), mention: "FrameTimeout 1ns is shorter than the timer wheel's tick 1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mention == "" {
				assert.NoError(t, tt.err)
				return
			}
			require.Error(t, tt.err)
			assert.Contains(t, tt.err.Error(), tt.mention)
		})
	}
}
