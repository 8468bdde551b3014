package main

import (
	"fmt"
	"runtime"

	"github.com/netwheel/netwheel/internal/fdlimit"
)

// eventLoops is the number of event loops netserver runs for the
// EventLoops setting n, as netserver.Server.Start picks it: n, or
// GOMAXPROCS-1 and at least 1 when n is 0.
func eventLoops(n int) int {
	if n > 0 {
		return n
	}
	return max(1, runtime.GOMAXPROCS(0)-1)
}

// maxConnsHere describes, for the help, the -max-conns this process gets
// by default with the EventLoops setting loops.
func maxConnsHere(openFiles uint64, loops int) string {
	loops = eventLoops(loops)
	n := fdlimit.MaxConns(openFiles, loops)
	switch {
	case n == 0:
		return "Here: no limit,\nthe open-file limit being unknown or unlimited"
	case uint64(n) == openFiles/2 || n == 1:
		return fmt.Sprintf("Here: %d, half\nthe open-file limit %d", n, openFiles)
	}
	return fmt.Sprintf("Here:\n%d = %d - %d - %d×%d", n, openFiles, fdlimit.Reserve, fdlimit.PerLoop, loops)
}

// sizeText writes a byte count for the help: "4194304, 4 MiB".
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d, %d MiB", n, n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d, %d KiB", n, n>>10)
	}
	return fmt.Sprint(n)
}
