package main

import (
	"runtime"
	"strconv"
)

// procsFor is the GOMAXPROCS the echo command runs with, given the
// runtime's default procs, the machine's cores (runtime.NumCPU) and the
// GOMAXPROCS environment variable env: one above procs when procs is the
// core count; procs otherwise, that is when env sets GOMAXPROCS (a positive
// whole number, as the runtime reads it: the operator's choice stands) or
// when a cgroup CPU limit made the runtime pick fewer Ps than cores (the
// runtime rounds a quota up, to at least 2, so a raise there would put
// more loops than the quota has CPUs).
//
// One above the cores, netserver's default of GOMAXPROCS-1 event loops is
// one loop per core, and a P stays free for the timer wheel's goroutine
// (netserver.Config.EventLoops; docs/design.md, "One loop per core, and
// GOMAXPROCS one above"). procsFor is pure: O(1), no allocation.
func procsFor(procs, cores int, env string) int {
	if n, err := strconv.Atoi(env); err == nil && n > 0 {
		return procs
	}
	if procs != cores {
		return procs
	}
	return procs + 1
}

// raiseProcs sets GOMAXPROCS to procsFor the runtime's default, the cores
// and env. Setting it stops the runtime from following later changes of
// the cgroup's CPU limit; main calls it once, before run.
func raiseProcs(env string) {
	runtime.GOMAXPROCS(procsFor(runtime.GOMAXPROCS(0), runtime.NumCPU(), env))
}
