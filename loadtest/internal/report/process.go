package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// This file holds the figures of the run beyond its scenarios: the embedded
// server's counters, an external server's leak check, its memory, the
// harness process's resources and its own scheduling.

// Server is what an embedded server reported.
type Server struct {
	Kind          string           `json:"kind"`
	Open          int64            `json:"open"` // at the end, after the clients closed
	Accepted      int64            `json:"accepted"`
	Closes        map[string]int64 `json:"closes,omitempty"`
	TimersPending int64            `json:"timers_pending"` // at the end
	Expiries      int64            `json:"expiries"`
	Probes        int64            `json:"probes"`
	Retransmits   int64            `json:"retransmits"`
	GiveUps       int64            `json:"give_ups"`
	PeakOpen      int64            `json:"peak_open"`
}

// Remote is an external server's own account of its resources, read from
// its metrics endpoint (-metrics) before the run and again after it, once
// the server had settled or a bound had passed: the leak check of -addr
// runs, which cannot look inside the server as embedded runs do.
type Remote struct {
	URL     string        `json:"url"`
	Settled time.Duration `json:"settled"` // from the end of the run to the after reading
	// Metrics are the figures checked, in report order.
	Metrics []RemoteMetric `json:"metrics"`
	// Err says why there is no after reading (the endpoint failed); the
	// before figures are kept.
	Err string `json:"err,omitempty"`
}

// RemoteMetric is one server metric before and after the run.
type RemoteMetric struct {
	Name      string  `json:"name"`  // as exposed: netwheel_connections_open, ...
	Label     string  `json:"label"` // for people: "connections open"
	Before    float64 `json:"before"`
	After     float64 `json:"after"`
	Tolerance float64 `json:"tolerance"` // growth allowed before it counts as a leak
	// Missing is set when the endpoint did not expose the metric before or
	// after the run; it is then not checked, and Before and After are 0.
	Missing bool `json:"missing,omitempty"`
	Leak    bool `json:"leak,omitempty"` // After > Before + Tolerance
}

// Leaks returns the metrics flagged as leaks.
func (r *Remote) Leaks() []RemoteMetric {
	var out []RemoteMetric
	for _, m := range r.Metrics {
		if m.Leak {
			out = append(out, m)
		}
	}
	return out
}

// Memory is the server's resident memory over a run with hostile
// scenarios, sampled while it ran, and the growth it is allowed.
type Memory struct {
	// Source is where it was read: /proc/self/status (the server embedded:
	// the client's memory is included, InProcess), /proc/PID/status, or a
	// metrics URL (process_resident_memory_bytes).
	Source    string `json:"source"`
	InProcess bool   `json:"in_process"`
	Before    int64  `json:"before"` // bytes, just before the run
	Peak      int64  `json:"peak"`   // the largest sample
	End       int64  `json:"end"`    // the last sample
	Samples   int    `json:"samples"`
	// Stopped says the floods were stopped when the growth passed the
	// bound: the verdict was in, and the server's memory need not grow on.
	Stopped bool        `json:"stopped,omitempty"`
	Bound   MemoryBound `json:"bound"`
	// Err says why there are no figures (nothing to read it from, or the
	// reading failed); the growth is then not judged.
	Err string `json:"err,omitempty"`
}

// MemoryBound is the memory growth allowed to a server whose output limits
// hold: the limits of every connection that may leave its output unread,
// an allowance for every other connection, and a fixed allowance.
type MemoryBound struct {
	OutputLimit  int64          `json:"output_limit"`  // bytes of queued output per connection before the server must close it
	UnackedLimit int64          `json:"unacked_limit"` // framed: bytes of unacknowledged DATA payload per connection (raw: 0)
	Filling      map[string]int `json:"filling"`       // connections that may leave their output unread, by scenario
	Other        int            `json:"other"`         // other connections open at once, at most
	PerOther     int64          `json:"per_other"`     // bytes allowed per other connection
	Fixed        int64          `json:"fixed"`         // bytes allowed besides
}

// PerConn is what one connection that does not read may hold in the
// server: its queued output and its unacknowledged payload.
func (b MemoryBound) PerConn() int64 { return b.OutputLimit + b.UnackedLimit }

// FillingConns is the number of connections that may leave their output
// unread.
func (b MemoryBound) FillingConns() int {
	n := 0
	for _, v := range b.Filling {
		n += v
	}
	return n
}

// Total is the growth allowed, in bytes.
func (b MemoryBound) Total() int64 {
	return int64(b.FillingConns())*b.PerConn() + int64(b.Other)*b.PerOther + b.Fixed
}

// PerOtherConn is the growth allowed per connection that reads what it
// gets (polite, splitter, garbage, connflood): its buffers and state and
// the runtime's around them. In-process it covers both ends of the
// connection and the client's goroutines: the default run's polite
// scenarios alone grow this process by 26-30 KiB per connection.
const PerOtherConn = 32 << 10

// For returns b, its limits and Fixed as given, for a run that opens conns
// connections by scenario, churn churn connections at once and neighbours
// beside sourceflood's flood: the limits of every connection that may not
// read (framed: the unacknowledged-payload limit too; raw: none),
// PerOtherConn for every other connection open at once (connflood and
// sourceflood run alone, so they count only if they have more), and Fixed.
func (b MemoryBound) For(conns map[string]int, churn, neighbours int, framed bool) MemoryBound {
	b.Filling, b.PerOther, b.Other = map[string]int{}, PerOtherConn, churn
	if !framed {
		b.UnackedLimit = 0
	}
	for s, n := range conns {
		switch {
		case scenario.Lookup(s).Alone:
		case scenario.Lookup(s).FillsOutput:
			if n > 0 {
				b.Filling[s] = n
			}
		default:
			b.Other += n
		}
	}
	b.Other = max(b.Other, conns[scenario.Connflood], conns[scenario.Sourceflood]+neighbours)
	return b
}

// ByteSize is a flag.Value of a byte count: a plain number, or one with a
// K, M or G suffix (KiB, MiB, GiB; "KiB", "MiB", "GiB" and "B" are
// accepted too).
type ByteSize int64

func (b *ByteSize) String() string {
	if b == nil {
		return "0"
	}
	v := int64(*b)
	for _, u := range []struct {
		s string
		n int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

// Get returns the count, an int64.
func (b *ByteSize) Get() any { return int64(*b) }

// Set parses s.
func (b *ByteSize) Set(s string) error {
	num, mult := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i"), int64(1)
	if num != "" {
		switch num[len(num)-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			num = num[:len(num)-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return fmt.Errorf("want a byte count such as 4096, 512K or 4MiB")
	}
	*b = ByteSize(v * mult)
	return nil
}

// Growth is the largest growth seen over the run, in bytes.
func (m *Memory) Growth() int64 { return m.Peak - m.Before }

// Unjudged returns why the growth is not judged, or "" if it is (or m is
// nil: no hostile scenario, nothing to judge): Err, or no reading after
// the one before the run (Samples < 2), which has no growth to see.
func (m *Memory) Unjudged() string {
	switch {
	case m == nil:
		return ""
	case m.Err != "":
		return m.Err
	case m.Samples < 2:
		return "the server's memory was not read during or after the run"
	}
	return ""
}

// Process is the harness process's resource use (client and, when
// embedded, server together).
type Process struct {
	CPU          time.Duration `json:"cpu"` // user + system
	PeakRSSBytes int64         `json:"peak_rss_bytes"`
	RSSBytes     int64         `json:"rss_bytes"`
	PeakConns    int64         `json:"peak_conns"` // client connections open at once
	Goroutines   [2]int        `json:"goroutines"` // before, after
	FDs          [2]int        `json:"fds"`        // before, after
}

// SelfLag is how promptly the harness itself got the CPU over the run
// (package lag measures it): a load generator kept waiting cannot tell a
// late server from its own lateness. Merged from shards, the histograms
// merge and the durations add up (Wall too, so that Stalled/Wall stays the
// share of the time stalled); CPUs is the largest.
type SelfLag struct {
	// Lag is how late each 1 ms wake of a monitor goroutine came, its wait
	// in the Go scheduler's queue behind the harness's goroutines
	// included, in ns.
	Lag *hist.Histogram `json:"lag"`
	// Stalled is the wakes' lateness beyond 1 ms, added up: the time the
	// harness was kept from running.
	Stalled time.Duration `json:"stalled"`
	Wall    time.Duration `json:"wall"` // how long it was measured
	CPUs    int           `json:"cpus" merge:"max"`
	// OwnCPU is the harness process's CPU time (the embedded server's
	// included), OtherCPU the busy time of every CPU of the machine that
	// was not the harness's: the other processes', and StealCPU what the
	// hypervisor took from the machine. From /proc (Linux), in 10 ms
	// ticks.
	OwnCPU   time.Duration `json:"own_cpu"`
	OtherCPU time.Duration `json:"other_cpu"`
	StealCPU time.Duration `json:"steal_cpu"`
	// ServerCPU is, with -server-pid, the server's CPU time, not counted
	// in OtherCPU: a server that takes the CPU is not the machine's load.
	ServerCPU time.Duration `json:"server_cpu,omitempty"`
	// Err says why the CPU figures are missing (no /proc); the lag is
	// still measured.
	Err string `json:"err,omitempty"`
}

// StalledShare returns the share of the run the harness was kept waiting,
// 0 to 1.
func (l *SelfLag) StalledShare() float64 {
	if l == nil || l.Wall <= 0 {
		return 0
	}
	return min(float64(l.Stalled)/float64(l.Wall), 1)
}

// Capacity returns the CPU time the machine had over the run: its CPUs
// times the wall time.
func (l *SelfLag) Capacity() time.Duration { return time.Duration(l.CPUs) * l.Wall }
