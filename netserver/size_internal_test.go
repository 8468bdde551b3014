package netserver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestConn_Size holds the per-connection structs within the size class the
// heap gives them: a field that crosses a class boundary costs every
// connection the whole step (16 bytes at these sizes, 32 past 256, 64
// past 512). What an idle Raw connection holds in all is
// TestMemoryPerIdleConn's.
func TestConn_Size(t *testing.T) {
	tests := []struct {
		name     string
		size     uintptr
		maxBytes uintptr // the size class it must fit in
	}{
		// 120 bytes since Conn.client (the PROXY header's client address,
		// out of line): the 128-byte class, 16 bytes more per Raw
		// connection; framedAlloc stays in its class.
		{name: "Conn", size: unsafe.Sizeof(Conn{}), maxBytes: 128},
		{name: "outWatch (once output stays queued)", size: unsafe.Sizeof(outWatch{}), maxBytes: 112},
		{name: "framedAlloc (Framed: Conn, protocol state, retransmit.Tracker)", size: unsafe.Sizeof(framedAlloc{}), maxBytes: 576},
	}
	for _, tt := range tests {
		assert.LessOrEqualf(t, tt.size, tt.maxBytes, "%s: %d bytes, more than its %d-byte size class", tt.name, tt.size, tt.maxBytes)
	}
}
