package scenario

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTable_Roles(t *testing.T) {
	for _, n := range []string{Nonreader, Splitter, Pingflood, Connflood, Garbage} {
		require.NotNil(t, Lookup(n), n)
		assert.True(t, Lookup(n).Hostile, n)
	}
	assert.False(t, Lookup(Echo).Hostile)
	assert.True(t, Lookup(Pingflood).Framed)
	assert.True(t, Lookup(Nonreader).FillsOutput)
	assert.False(t, Lookup(Splitter).FillsOutput, "a splitter reads its echoes")
	assert.Equal(t, RoleReading, Lookup(Pingflood).Role(Framed, 0))
	assert.Equal(t, RoleNotReading, Lookup(Pingflood).Role(Framed, 1))
	assert.Equal(t, GarbageHugeLength, Lookup(Garbage).Role(Framed, 2))
	assert.Equal(t, GarbageRandom, Lookup(Garbage).Role(Raw, 1), "raw has no frames to break")
	assert.True(t, Lookup(Idle).Quiet(0))
	assert.True(t, Lookup(Keepalive).Quiet(1), "odd keepalive connections are the silent half")
	assert.False(t, Lookup(Keepalive).Quiet(2), "survivors do not wait")
	assert.False(t, Lookup(Echo).Quiet(1))
	assert.True(t, Lookup(Keepalive).Expects(RoleSilent))
	assert.False(t, Lookup(Keepalive).Expects(RoleSurvivor))
	assert.Nil(t, Lookup("nosuch"))
	assert.Equal(t, len(All), len(Names()))
}

// TestTable_Default: the default set holds what applies and what its
// flags make judgeable, nothing else.
func TestTable_Default(t *testing.T) {
	def := func(e Env) []string {
		var out []string
		for i := range All {
			if All[i].InDefault(e) {
				out = append(out, All[i].Name)
			}
		}
		return out
	}
	redis := Env{Proto: Raw, External: true, CountedAnswers: true, OtherProtocol: true, Expect: `"+PONG\r\n"`, Size: 6}
	assert.Equal(t, []string{Echo, Idle, Churn, Nonreader}, def(redis), "a raw server of another protocol: no framed-only, no splitter, no garbage")
	framed := Env{Proto: Framed, EchoAnswers: true, CountedAnswers: true, Size: 64, HostileBytes: 64 << 20, OutputLimit: 4 << 20}
	assert.Equal(t, []string{Echo, Idle, Keepalive, Retransmit, Slowloris, Churn, Nonreader, Splitter, Pingflood, Garbage}, def(framed))
	framed.MaxConns, framed.Handshake = 10, 1
	assert.Contains(t, def(framed), Connflood)
	assert.Contains(t, def(framed), Handshake)
	assert.Contains(t, Lookup(Nonreader).NotApplicable(Env{Proto: Raw, HostileBytes: 4 << 20, OutputLimit: 4 << 20}), "not above the server's limit")
}

// TestAssumed: a note names each timeout flag of a scenario that applies
// and was not given; a scenario that does not apply, or whose timeouts were
// all given, has none.
func TestAssumed(t *testing.T) {
	redis := Env{Proto: Raw, External: true, CountedAnswers: true, OtherProtocol: true, Expect: `"+PONG\r\n"`, Size: 6}
	notes := Assumed([]string{Echo, Idle, Keepalive}, redis, map[string]bool{"addr": true})
	assert.Equal(t, []string{"idle: judged against the harness's default -idle (not given: the server's own may differ)"}, notes,
		"echo has no timeout, keepalive does not apply to a raw server")
	assert.Empty(t, Assumed([]string{Idle}, redis, map[string]bool{"idle": true}))
}
