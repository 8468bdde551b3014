package shard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse_Auto(t *testing.T) {
	tests := []struct {
		name         string
		index, count string
		wantI, wantN int
		wantErr      string
	}{
		{name: "first of three", index: "0", count: "3", wantI: 0, wantN: 3},
		{name: "last of three", index: "2", count: "3", wantI: 2, wantN: 3},
		{name: "no index", count: "3", wantErr: "$JOB_COMPLETION_INDEX is not set"},
		{name: "no count", index: "0", wantErr: "$LOADTEST_SHARDS is not set"},
		{name: "count not a number", index: "0", count: "three", wantErr: `$LOADTEST_SHARDS="three"`},
		{name: "zero count", index: "0", count: "0", wantErr: "at least 1"},
		{name: "index past the count", index: "3", count: "3", wantErr: `$JOB_COMPLETION_INDEX="3": want 0 to 2`},
		{name: "negative index", index: "-1", count: "3", wantErr: "want 0 to 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{EnvIndex: tt.index, EnvCount: tt.count}
			got, err := Parse("auto", func(k string) string { return env[k] })
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Shard{I: tt.wantI, N: tt.wantN}, got)
		})
	}
}

func TestShard_ShareSplitsExactly(t *testing.T) {
	for _, tc := range []struct{ total, n int }{{10, 3}, {2, 5}, {0, 4}, {15000, 7}, {1, 1}} {
		sum, lo, hi := 0, tc.total, 0
		for i := range tc.n {
			s := Shard{I: i, N: tc.n}.Share(tc.total)
			sum += s
			lo, hi = min(lo, s), max(hi, s)
		}
		assert.Equal(t, tc.total, sum, "%v", tc)
		assert.LessOrEqual(t, hi-lo, 1, "%v", tc)
	}
}
