package main

import (
	"runtime"
	"strconv"
)

// procsFor is the GOMAXPROCS the echo command runs with, given the
// runtime's default procs (the usable cores, cgroup limits included) and
// the GOMAXPROCS environment variable env: one above procs, unless env
// sets GOMAXPROCS (a positive whole number, as the runtime reads it), in
// which case procs is the operator's choice and stands.
//
// One above the cores, netserver's default of GOMAXPROCS-1 event loops is
// one loop per core, and a P stays free for the timer wheel's goroutine:
// a loop waiting in epoll_wait keeps its P, and a runtime timer on a P
// held that way fires late (netserver.Config.EventLoops). The spare P
// costs nothing while the wheel sleeps; issue 14's layout study has the
// measurements behind the choice. procsFor is pure: O(1), no allocation.
func procsFor(procs int, env string) int {
	if n, err := strconv.Atoi(env); err == nil && n > 0 {
		return procs
	}
	return procs + 1
}

// raiseProcs sets GOMAXPROCS to procsFor the runtime's default and env,
// and returns it. Setting it stops the runtime from following later
// changes of the cgroup's CPU limit; main calls it once, before run.
func raiseProcs(env string) int {
	n := procsFor(runtime.GOMAXPROCS(0), env)
	runtime.GOMAXPROCS(n)
	return n
}
