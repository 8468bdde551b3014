package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/attack"
	"github.com/netwheel/netwheel/loadtest/internal/embedded"
)

// progress prints a live line every second when stdout is a terminal and
// -q is not set; the returned function stops it and clears the line.
func progress(o *options, ctr *attack.Counters, srv *embedded.Server, stdout io.Writer) func() {
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
				srv.Sample()
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
