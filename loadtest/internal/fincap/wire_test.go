package fincap

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/lagmeter"
)

func TestParse(t *testing.T) {
	p := make([]byte, 40)
	p[0], p[9] = 0x45, 6 // IPv4, 20-byte header, TCP
	copy(p[16:20], []byte{127, 0, 0, 2})
	p[20], p[21], p[22], p[23] = 0x4d, 0x4d, 0xc3, 0x50 // 19789 -> 50000
	p[33] = 0x11                                        // FIN, ACK
	src, dst, fin, ok := parse(p)
	require.True(t, ok)
	assert.Equal(t, uint16(19789), src)
	assert.Equal(t, Client{IP: [4]byte{127, 0, 0, 2}, Port: 50000}, dst)
	assert.True(t, fin)
	p[33] = 0x10 // ACK alone
	_, _, fin, _ = parse(p)
	assert.False(t, fin)
	p[9] = 17 // UDP
	_, _, _, ok = parse(p)
	assert.False(t, ok)
	_, _, _, ok = parse(p[:30])
	assert.False(t, ok, "too short")
}

func TestTake(t *testing.T) {
	c := newCapture(1)
	c.stop = func() {}
	a := Client{IP: [4]byte{127, 0, 0, 1}, Port: 7}
	b := Client{IP: [4]byte{127, 0, 0, 2}, Port: 7}
	at := time.Unix(100, 0)
	go func() { time.Sleep(5 * time.Millisecond); c.record(a, at) }()
	got, ok := c.Take(a, at.Add(-time.Second), 5*time.Second)
	require.True(t, ok, "a FIN recorded while Take waits")
	assert.Equal(t, at, got)
	_, ok = c.Take(a, time.Time{}, time.Millisecond)
	assert.False(t, ok, "taken once")

	c.record(b, at)
	_, ok = c.Take(a, time.Time{}, time.Millisecond)
	assert.False(t, ok, "the same port from another address is another client")
	_, ok = c.Take(b, at.Add(time.Second), time.Millisecond)
	assert.False(t, ok, "a FIN from before the connection opened closed an earlier one")

	c.record(a, at)
	c.record(a, at.Add(50*time.Millisecond))
	got, _ = c.Take(a, time.Time{}, time.Millisecond)
	assert.Equal(t, at, got, "a retransmitted FIN does not replace the first")
	c.record(a, at)
	c.record(a, at.Add(time.Second))
	got, _ = c.Take(a, time.Time{}, time.Millisecond)
	assert.Equal(t, at.Add(time.Second), got, "a later connection's FIN replaces a stale one")

	c.Close()
	_, ok = c.Take(Client{Port: 8}, time.Time{}, time.Hour)
	assert.False(t, ok, "a closed capture waits for nothing")
}

// TestCapture_ServerFIN closes a connection from the server side and checks
// that the capture saw its FIN leave between the close call and the
// client's end of file. The packet socket stamps the FIN as it receives its
// copy, which on a busy machine can come a little after the client woke:
// the upper bound allows a millisecond plus twice the measured lag.
func TestCapture_ServerFIN(t *testing.T) {
	lag := lagmeter.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := Open(uint16(ln.Addr().(*net.TCPAddr).Port))
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no packet capture here (%v): the capture is tested where the privilege is", err)
	}
	require.NoError(t, err)
	defer c.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer cl.Close()
	sc, err := ln.Accept()
	require.NoError(t, err)
	before := time.Now()
	require.NoError(t, sc.Close())
	_, err = cl.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	eof := time.Now()
	fin, ok := c.Take(Client{IP: [4]byte{127, 0, 0, 1}, Port: uint16(cl.LocalAddr().(*net.TCPAddr).Port)}, before.Add(-time.Second), 5*time.Second)
	require.True(t, ok, "the server's FIN was not captured")
	assert.False(t, fin.Before(before.Add(-time.Millisecond)), "FIN %v before the close %v", fin, before)
	assert.False(t, fin.After(eof.Add(lag.Slack(time.Millisecond))), "FIN %v after the client's end of file %v (lag %v)",
		fin, eof, lag.Stalled())
	_, ok = c.Take(Client{IP: [4]byte{127, 0, 0, 1}, Port: uint16(ln.Addr().(*net.TCPAddr).Port)}, time.Time{}, 10*time.Millisecond)
	assert.False(t, ok, "the client's own FIN is not the server's")
}
