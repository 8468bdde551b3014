// Package lag measures how promptly the harness itself got the CPU during
// a run: a goroutine asks to wake every millisecond and records how late
// it woke (and how long it then waited in the Go scheduler's queue behind
// the harness's other goroutines), and /proc tells how much CPU the other
// processes of the machine took meanwhile, and the hypervisor (steal).
// A load generator that was not scheduled cannot tell a late server from
// its own lateness; the report uses these figures to say so.
//
// It is not a CPU profiler: the figures are the harness's, the embedded
// server's included, as a scheduler saw them.
package lag

import (
	"cmp"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/limits"
	"github.com/netwheel/netwheel/loadtest/internal/report"
)

// Monitor measures the harness's scheduling lag from Start to Stop.
//
// Ownership: the sampling goroutine (record) owns lag until it exits; Stop
// waits for it and only then reads lag. start and cpu0 are set by Start.
type Monitor struct {
	done chan struct{}
	wg   sync.WaitGroup
	lag  hist.Histogram // ns: how late each wake came, queueing included
	// stalled is the sum of the lateness beyond stallFloor: the time the
	// harness was kept waiting.
	stalled time.Duration
	start   time.Time
	cpu0    CPU
	cpuErr  error
	// serverPID is the server's process (0: none known), whose CPU is not
	// the other processes': a server that burns the CPU is the server's
	// fault, not the machine's. server0 is its CPU time at the start.
	serverPID int
	server0   time.Duration
	serverErr error
}

// stallFloor is the lateness counted as noise rather than a stall (as the
// tests' meter counts it).
const stallFloor = lagmeter.Floor

// Start starts a monitor; Stop ends it. It costs one goroutine waking
// every lagmeter.Period (a few microseconds of CPU each time). serverPID,
// if not 0, is the process of the server under test on this machine: its
// CPU is counted apart from the other processes'.
func Start(serverPID int) *Monitor {
	m := &Monitor{done: make(chan struct{}), start: time.Now(), serverPID: serverPID}
	m.cpu0, m.cpuErr = ReadCPU()
	if serverPID != 0 {
		m.server0, m.serverErr = limits.ProcCPU(serverPID)
	}
	m.wg.Go(func() { lagmeter.Sample(m.done, m.record) })
	return m
}

// record adds one wake's lateness. Only the sampling goroutine calls it.
func (m *Monitor) record(late time.Duration) {
	m.lag.Record(int64(late))
	if late > stallFloor {
		m.stalled += late - stallFloor
	}
}

// Stop ends the monitor and returns its figures. Call it once, from the
// goroutine that called Start.
func (m *Monitor) Stop() *report.SelfLag {
	close(m.done)
	m.wg.Wait()
	end := time.Now()
	cpu1, err := ReadCPU()
	if m.cpuErr != nil {
		err = m.cpuErr
	}
	s := &report.SelfLag{Lag: &m.lag, Stalled: m.stalled, Wall: end.Sub(m.start), CPUs: runtime.NumCPU()}
	if err != nil {
		s.Err = err.Error()
		return s
	}
	d := cpu1.Sub(m.cpu0)
	s.OwnCPU, s.OtherCPU, s.StealCPU, s.CPUs = d.Own, d.Others(), d.Steal, max(d.CPUs, 1)
	if m.serverPID != 0 {
		server1, err := limits.ProcCPU(m.serverPID)
		if err == nil && m.serverErr == nil {
			s.ServerCPU = max(server1-m.server0, 0)
			s.OtherCPU = max(s.OtherCPU-s.ServerCPU, 0)
		} else {
			s.Err = fmt.Sprintf("the server's CPU (-server-pid %d) not read, so not told from the other processes': %v", m.serverPID, cmp.Or(m.serverErr, err))
		}
	}
	return s
}

// WaitRunning polls done every 20 ms until it reports true or this process
// has had running time d, not counting the time it was kept waiting for
// the CPU (a poll that comes late extends the wait by its lateness), or
// bound has passed. It reports whether done did.
func WaitRunning(d, bound time.Duration, done func() bool) bool {
	const every = 20 * time.Millisecond
	start := time.Now()
	deadline := start.Add(d)
	for !done() {
		now := time.Now()
		if !now.Before(deadline) || now.Sub(start) >= bound {
			return false
		}
		time.Sleep(every)
		if late := time.Since(now) - every; late > time.Millisecond {
			deadline = deadline.Add(late)
		}
	}
	return true
}
