package netserver_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// logCapture is a slog.Handler that keeps every record it is given, at
// every level, for tests that check what the server logged and with which
// attributes. Its methods may be called from any goroutine.
//
// Ownership: records is guarded by mu; attrs is set when the handler is
// made (WithAttrs) and read-only after. Handlers made by WithAttrs share
// the parent's records.
type logCapture struct {
	mu      *sync.Mutex
	records *[]slog.Record // under mu
	attrs   []slog.Attr    // added to every record (WithAttrs)
}

// newLogCapture returns a logger for Config.Logger and the handler that
// keeps what it logs.
func newLogCapture() (*slog.Logger, *logCapture) {
	h := &logCapture{mu: new(sync.Mutex), records: new([]slog.Record)}
	return slog.New(h), h
}

// Enabled reports true: every level is kept.
func (*logCapture) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of r, with the handler's attributes added.
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	*h.records = append(*h.records, r)
	h.mu.Unlock()
	return nil
}

// WithAttrs returns a handler that adds attrs to every record and keeps
// them with h's.
func (h *logCapture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logCapture{mu: h.mu, records: h.records, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], attrs...)}
}

// WithGroup returns h: group names are dropped and the attributes kept
// flat, which is all the tests need (the server logs no groups).
func (h *logCapture) WithGroup(string) slog.Handler { return h }

// attrsOf returns the attributes, by key, of each record logged so far with
// the message msg, in the order logged.
func (h *logCapture) attrsOf(msg string) []map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var found []map[string]slog.Value
	for _, r := range *h.records {
		if r.Message != msg {
			continue
		}
		m := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.Resolve()
			return true
		})
		found = append(found, m)
	}
	return found
}

// intAttr returns the integer value of attrs[key], failing the test if it
// is missing or not an integer.
func intAttr(t *testing.T, attrs map[string]slog.Value, key string) int64 {
	t.Helper()
	v, ok := attrs[key]
	require.True(t, ok, "no %s in %v", key, attrs)
	require.Equal(t, slog.KindInt64, v.Kind(), "%s = %v", key, v)
	return v.Int64()
}
