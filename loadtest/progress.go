package main

import (
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/fincap"
)

// progress prints a live line every second when stdout is a terminal and
// -q is not set; the returned function stops it and clears the line.
func progress(o *options, ctr *attack.Counters, srv embeddedServer, srvPeak *int64, stdout io.Writer) func() {
	f, ok := stdout.(*os.File)
	tty := ok && isTerminal(f)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		start := time.Now()
		var lastRecv int64
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			if srv != nil {
				*srvPeak = max(*srvPeak, srv.Stats().Open)
			}
			if !tty || o.quiet {
				continue
			}
			recv := ctr.Recv.Load()
			fmt.Fprintf(stdout, "\r\033[K%3.0fs  open %d  msgs/s %d  dial errors %d  errors %d  ended: %s",
				time.Since(start).Seconds(), ctr.Open.Load(), recv-lastRecv, ctr.DialErrors.Load(), ctr.Errors.Load(), endsLine(ctr.Ends()))
			lastRecv = recv
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if tty && !o.quiet {
			fmt.Fprint(stdout, "\r\033[K")
		}
	}
}

// endsLine is how connections ended so far, by reason in name order.
func endsLine(m map[string]int64) string {
	s := ""
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s += fmt.Sprintf("%s=%d ", k, m[k])
	}
	return s
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// openFINs starts the capture of the FINs the server at target sends on
// the loopback; without the privilege or a loopback target it returns a
// note saying why there is none.
func openFINs(target string) (*fincap.Capture, string, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, "", fmt.Errorf("loadtest: -fins: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return nil, "-fins: not done: the server is not at an IPv4 loopback address", nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, "", fmt.Errorf("loadtest: -fins: port %q: %w", port, err)
	}
	c, err := fincap.Open(uint16(n))
	if err != nil { // best effort: a note, not a failed run
		return nil, "-fins: not done: " + err.Error(), nil
	}
	return c, "", nil
}
