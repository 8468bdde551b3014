package report

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/hist"
)

var update = flag.Bool("update", false, "rewrite testdata/fields_v<Version>.txt from the result's types")

// fields returns the JSON paths of every field a result can hold, with
// each field's JSON kind: duration (a Go duration string), histogram,
// and so on. A map's keys are written as *, a list's items as [].
func fields(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind := func(ft reflect.Type) string {
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeFor[time.Duration]():
			return "duration"
		case ft == reflect.TypeFor[time.Time]():
			return "time"
		case ft == reflect.TypeFor[hist.Histogram]():
			return "histogram"
		}
		return ft.Kind().String()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := prefix + name
		ft := f.Type
		*out = append(*out, path+" "+kind(ft))
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct && kind(ft) == "struct":
			fields(ft, path+".", out)
		case (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map) && kind(ft.Elem()) == "struct":
			sep := ".[]."
			if ft.Kind() == reflect.Map {
				sep = ".*."
			}
			fields(ft.Elem(), path+sep, out)
		}
	}
}

// TestResultFormat_Golden fails when a field of the JSON result is added,
// removed, renamed or changes kind, until the change is documented in
// docs/results.md and Version is bumped (go test -run Golden -update
// writes the new version's list once Version is bumped).
func TestResultFormat_Golden(t *testing.T) {
	var got []string
	fields(reflect.TypeFor[Result](), "", &got)
	golden := filepath.Join("testdata", fmt.Sprintf("fields_v%d.txt", Version))
	if *update {
		_, err := os.Stat(golden)
		require.True(t, os.IsNotExist(err), "%s exists: a changed format needs a new Version, not a rewritten list", golden)
		require.NoError(t, os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644))
	}
	b, err := os.ReadFile(golden)
	require.NoError(t, err, "no field list for format version %d: bump Version only with one (go test -run Golden -update)", Version)
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	assert.Equal(t, want, got, "the result's fields changed: document them in docs/results.md and bump Version")

	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "results.md"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), fmt.Sprintf("format version %d", Version), "docs/results.md documents this version")
	for _, line := range got {
		path, _, _ := strings.Cut(line, " ")
		assert.Contains(t, string(doc), "`"+path+"`", "docs/results.md documents every field")
	}

	// A result written with every section round-trips: the reader reads
	// what the writer writes, durations included.
	r := idleRun(10, redisLate, selfLag(time.Millisecond, 1000, time.Second))
	r.Memory, r.Process, r.Server = &Memory{Samples: 2, Bound: MemoryBound{Filling: map[string]int{"nonreader": 1}}}, &Process{CPU: time.Second}, &Server{Kind: "netwheel"}
	var sb strings.Builder
	require.NoError(t, JSON(&sb, r, r.Judge()))
	back, err := ReadJSON(strings.NewReader(sb.String()))
	require.NoError(t, err)
	assert.Equal(t, r.Config, back.Config)
	assert.Equal(t, r.Scenarios[0].Closes.Late, back.Scenarios[0].Closes.Late)
	assert.True(t, slices.Equal(r.Shards, back.Shards))
	assert.Equal(t, time.Second, back.Process.CPU)
}
