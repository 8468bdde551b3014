package netserver_test

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docExample returns the bytes of docs/protocol.md's example, in order, as
// lines "client -> HEX  comment" and "server -> HEX  comment".
func docExample(t *testing.T) (client, server [][]byte) {
	t.Helper()
	f, err := os.Open("../docs/protocol.md")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	inExample := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## Example") {
			inExample = true
			continue
		}
		if !inExample {
			continue
		}
		who, rest, ok := strings.Cut(line, " -> ")
		if !ok {
			continue
		}
		hexPart, _, _ := strings.Cut(strings.TrimSpace(rest), "   ")
		b, err := hex.DecodeString(strings.ReplaceAll(hexPart, " ", ""))
		require.NoError(t, err, "example line %q", line)
		switch who {
		case "client":
			client = append(client, b)
		case "server":
			server = append(server, b)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, server, "no example found in docs/protocol.md")
	return client, server
}

// The example in docs/protocol.md is what the server really sends, byte for
// byte and in that order.
func TestProtocolDoc_ExampleIsWhatTheServerSends(t *testing.T) {
	client, server := docExample(t)
	s := start(t, framedCfg(), nil)
	c := dial(t, s)
	c.Push(client[0])
	var want []byte
	for _, b := range server {
		want = append(want, b...)
	}
	got := make([]byte, 0, len(want))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
	for len(got) < len(want) {
		buf := make([]byte, len(want)-len(got))
		n, err := c.Read(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
	for _, b := range client[1:] {
		c.Push(b) // the rest of the client's side is accepted
	}
}
