// Package shard splits a load test over processes: which shard this one
// is (-shard i/n, or auto in a Kubernetes Indexed Job) and its share of
// each count. Its values may be used from any goroutine.
package shard

import (
	"fmt"
	"strconv"
	"strings"
)

// Environment variables of -shard auto: a Kubernetes Indexed Job sets
// JOB_COMPLETION_INDEX (0-based) in each pod; the Job's manifest sets
// LOADTEST_SHARDS to its completions.
const (
	EnvIndex = "JOB_COMPLETION_INDEX"
	EnvCount = "LOADTEST_SHARDS"
)

// Shard is one shard of a test spread over processes: the I-th (0-based)
// of N. Its share of a count is Share's.
type Shard struct{ I, N int }

// String is the shard as -shard takes it, 1-based: "2/4".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.I+1, s.N) }

// Share returns the shard's share of total items: the shares of the N
// shards differ by at most one and add up to total.
func (s Shard) Share(total int) int {
	n := total / s.N
	if s.I < total%s.N {
		n++
	}
	return n
}

// Parse parses -shard: "i/n" with 1 <= i <= n, or "auto": the 0-based
// index from $JOB_COMPLETION_INDEX and the count from $LOADTEST_SHARDS,
// read with getenv.
func Parse(s string, getenv func(string) string) (Shard, error) {
	if s == "auto" {
		i, n, err := fromEnv(getenv)
		return Shard{i, n}, err
	}
	var i, n int
	var err error
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("-shard %q: want i/n with 1 <= i <= n, such as 1/2, or auto", s)
	}
	return Shard{i - 1, n}, nil
}

// fromEnv is -shard auto: the shard of this pod of an Indexed Job.
func fromEnv(getenv func(string) string) (i, n int, err error) {
	is, ns := getenv(EnvIndex), getenv(EnvCount)
	switch {
	case is == "":
		return 0, 0, fmt.Errorf("-shard auto: $%s is not set (Kubernetes sets it in the pods of an Indexed Job; elsewhere give -shard i/n)", EnvIndex)
	case ns == "":
		return 0, 0, fmt.Errorf("-shard auto: $%s is not set (set it in the Job's manifest to its completions, the number of shards)", EnvCount)
	}
	if n, err = strconv.Atoi(ns); err != nil || n < 1 {
		return 0, 0, fmt.Errorf("-shard auto: $%s=%q: want the number of shards, at least 1", EnvCount, ns)
	}
	if i, err = strconv.Atoi(is); err != nil || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("-shard auto: $%s=%q: want 0 to %d, below $%s=%d", EnvIndex, is, n-1, EnvCount, n)
	}
	return i, n, nil
}
