package frame_test

import (
	"bufio"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver/frame"
)

// docTable returns the rows of the first table in docs/protocol.md whose
// header starts with first: each row's first two cells.
func docTable(t *testing.T, first string) [][2]string {
	t.Helper()
	f, err := os.Open("../../docs/protocol.md")
	require.NoError(t, err)
	defer f.Close()
	var rows [][2]string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| "+first+" |"):
			in = rows == nil
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(line, "|")
			rows = append(rows, [2]string{strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])})
		default:
			in = false
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rows, "no table %q in docs/protocol.md", first)
	return rows
}

// docs/protocol.md's tables of types and close codes are the codec's:
// every type Parse knows, GOAWAY included, and every code with its name.
func TestProtocolDoc_TablesAreTheCodecs(t *testing.T) {
	types := docTable(t, "type")
	for i, row := range types {
		n, err := strconv.Atoi(row[0])
		require.NoError(t, err, "row %d", i)
		assert.Equal(t, strings.ToUpper(frame.Type(n).String()), row[1], "type %d", n)
	}
	assert.Equal(t, int(frame.TypeGoAway), len(types), "one row per type, 1 to GOAWAY")

	for _, row := range docTable(t, "code") {
		n, err := strconv.Atoi(row[0])
		if err != nil {
			continue // the range of application codes
		}
		assert.Equal(t, frame.Code(n).String(), row[1], "code %d", n)
	}
}

// The GOAWAY bytes in docs/protocol.md are AppendGoAway's.
func TestProtocolDoc_GoAwayBytes(t *testing.T) {
	b, err := os.ReadFile("../../docs/protocol.md")
	require.NoError(t, err)
	want := frame.AppendGoAway(nil, frame.CodeShutdown, 7, 5*time.Second, "draining")
	var spaced []string
	for _, c := range want {
		spaced = append(spaced, hex.EncodeToString([]byte{c}))
	}
	assert.Contains(t, string(b), "\n  "+strings.Join(spaced, " ")+"\n")
}
