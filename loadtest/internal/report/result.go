// Package report holds the load-test harness's results: the per-connection
// outcomes an attack streams out (ConnResult), the per-scenario figures they
// fold into (Scenario), the whole run (Result), and the reporters, which are
// plain functions of a Result: Text, SVG, HTML and JSON, plus Merge for
// results of several shards.
//
// Every type here is plain data owned by one goroutine at a time.
package report

import (
	"fmt"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
)

// Version is the version of the JSON result format.
const Version = 1

// Timeouts describes the server's timer configuration: what the harness
// expects. Zero means "off".
type Timeouts struct {
	Idle             time.Duration `json:"idle"`
	KeepaliveTime    time.Duration `json:"keepalive_time"`
	KeepaliveTimeout time.Duration `json:"keepalive_timeout"`
	KeepaliveCount   int           `json:"keepalive_count"`
	Frame            time.Duration `json:"frame"`
	InitialRTO       time.Duration `json:"initial_rto"`
	MinRTO           time.Duration `json:"min_rto"`
	MaxRTO           time.Duration `json:"max_rto"`
	MaxRetransmits   int           `json:"max_retransmits"`
	GiveUpAfter      time.Duration `json:"give_up_after"`
	// Handshake is how long after it opened a connection that sends
	// nothing is closed: its handshake (raw netwheel: first byte; framed:
	// first frame) must come by then. 0: none known.
	Handshake time.Duration `json:"handshake,omitempty"`
	Tick      time.Duration `json:"tick"`  // the server wheel's tick: early-reap tolerance
	Slack     time.Duration `json:"slack"` // how late a close may come and still count
}

// DeadPeerAfter returns how long after the last inbound byte a silent peer
// is closed by keepalive: KeepaliveTime + KeepaliveCount*KeepaliveTimeout
// (a count of 0 means 1), or 0 if keepalive is off.
func (t Timeouts) DeadPeerAfter() time.Duration {
	if t.KeepaliveTime <= 0 {
		return 0
	}
	return t.KeepaliveTime + time.Duration(max(t.KeepaliveCount, 1))*t.KeepaliveTimeout
}

// Config is the harness configuration a result was produced with.
type Config struct {
	Target    string         `json:"target"` // "embedded" or HOST:PORT
	Server    string         `json:"server"` // embedded server kind, or "external"
	Proto     string         `json:"proto"`
	Scenarios []string       `json:"scenarios"`
	Conns     map[string]int `json:"conns"` // requested, per scenario, all shards
	Rate      float64        `json:"rate"`  // echo messages/s per connection
	Size      int            `json:"size"`
	Duration  time.Duration  `json:"duration"`
	Closed    bool           `json:"closed_loop"`
	ChurnRate float64        `json:"churn_rate"`
	Timeouts  Timeouts       `json:"timeouts"`
	// Known, for an external server, is what the flags told of its
	// timeouts: Timeouts with the fields no flag gave zeroed (Timeouts
	// holds the harness's defaults the scenarios assumed for them). The
	// header shows Known when it is set.
	Known *Timeouts `json:"known_timeouts,omitempty"`
	// Payload and Expect describe a raw protocol other than echo: each
	// message (Go-quoted) and what its answer must be (as -expect takes
	// it); both "" for an echo server.
	Payload string `json:"payload,omitempty"`
	Expect  string `json:"expect,omitempty"`
	// CloseHorizon is how long after its expected close a connection
	// waited for the server's close (-close-horizon); 0 in results written
	// before it, which waited the slack.
	CloseHorizon time.Duration `json:"close_horizon,omitempty"`
}

// ConnResult is what one connection of an attack reports when it ends.
type ConnResult struct {
	Scenario string
	Role     string        // echo, idle, handshake, survivor, silent, retransmit, slowloris, churn, or a hostile role
	DialErr  string        // kind of dial failure (fd_limit, ephemeral_ports, ...); "" if connected
	Connect  time.Duration // dial time
	OpenedAt time.Time     `json:"-"` // when the dial completed (not written to results)
	Sent     uint64        // messages sent
	Recv     uint64        // echoes received
	Err      string        // kind of error that ended it early, if any
	Lost     uint64        // messages sent but never answered
	// End says how it ended: a close reason from the server's CLOSE frame
	// (idle, dead_peer, ...), "eof" or "reset" when the server closed without
	// one, "client" when the harness closed it, EndBadServerFrame when the
	// harness gave up on bytes from the server it could not parse (not a
	// close by the server).
	End string
	// Expect is the close reason the connection should get from a server
	// timeout ("" if it should survive); ExpectedAt is when.
	Expect     string
	ExpectedAt time.Time
	ClosedAt   time.Time // when the server's close was seen; zero if it was not
	// WireFinAt is, with a capture of the loopback (loadtest -fins), when
	// the kernel passed the server's FIN to this connection: the server's
	// close, without the client's delay to read it. Zero if not captured.
	WireFinAt time.Time `json:",omitzero"`
	// AckedAt is, for an idle connection, when the server's answer to its
	// last message arrived (framed: the ACK; raw: the echo); zero if none.
	// The server read the message between the send and AckedAt.
	AckedAt  time.Time
	Pings    int // pings received
	Retx     []time.Duration
	Survivor bool // expected to stay open until the harness closes it

	// Hostile connections: when the misbehaviour began (zero for polite
	// ones; ClosedAt is then when the server's close was seen, zero if it
	// kept the connection), the bytes and writes sent, and the echoes that
	// differed from what was sent (splitter).
	Misbehaved time.Time `json:"-"`
	Bytes      uint64
	Writes     uint64
	Mismatch   uint64
}

// Ends of a connection that are not a close by the server (ConnResult.End).
const (
	EndClient = "client" // the harness closed it
	// EndBadServerFrame: the server sent bytes the client could not parse
	// (framed), and the client closed. It is named apart from the server's
	// own protocol_error CLOSE, which is the server's judgement of the
	// client's bytes.
	EndBadServerFrame = "bad_server_frame"
)

// Scenario is the figures of one scenario. The JSON form is the full record.
type Scenario struct {
	Name string `json:"name"`
	// AnswerWait is how long the harness waits for the answer to a message
	// before it counts it lost, and DialWait for a connection to open; the
	// caller sets them (0: not known, a lost message or a dial timeout is
	// then no check of timing).
	AnswerWait time.Duration `json:"answer_wait,omitempty"`
	DialWait   time.Duration `json:"dial_wait,omitempty"`
	// Proto is the client protocol, "raw" or "framed"; the caller sets it
	// before adding results. It decides what a close can say: a raw
	// server closes without a reason (EOF), a framed one with a CLOSE
	// frame. Empty (results written before it) counts as framed.
	Proto      string         `json:"proto,omitempty"`
	Conns      int            `json:"conns"`  // connections attempted
	Opened     int            `json:"opened"` // connected
	DialErrors map[string]int `json:"dial_errors,omitempty"`
	Elapsed    time.Duration  `json:"elapsed"` // the sending window, for rates
	Sent       uint64         `json:"sent"`
	Recv       uint64         `json:"recv"`
	Lost       uint64         `json:"lost"`
	Errors     map[string]int `json:"errors,omitempty"`
	Ends       map[string]int `json:"ends,omitempty"` // how connections ended

	Latency *hist.Histogram `json:"latency,omitempty"` // ns, echo round trips
	Connect *hist.Histogram `json:"connect,omitempty"` // ns, dial times

	// Timer checks: connections that a server timeout must close.
	Expect      string         `json:"expect,omitempty"`
	Expected    int            `json:"expected,omitempty"`
	Reaped      int            `json:"reaped,omitempty"`       // closed within slack, right reason
	WrongReason map[string]int `json:"wrong_reason,omitempty"` // closed in time for another reason
	// Late counts the closes seen after expected + slack but within the
	// horizon, whatever their reason: their lateness is in ReapError.
	Late int `json:"late,omitempty"`
	// NeverReaped counts the connections not closed within the horizon
	// after their expected close (results written before the horizon: not
	// within the slack, late ones included).
	NeverReaped int `json:"never_reaped,omitempty"`
	// Horizon is how long after its expected close each connection waited
	// for the close; the caller sets it (0: the slack).
	Horizon time.Duration `json:"horizon,omitempty"`
	Early   int           `json:"early,omitempty"` // closed more than a tick early
	// EarlyDeadPeer counts the early closes of connections the server
	// closed as dead peers although they were not to be: the harness did
	// not answer its pings in time.
	EarlyDeadPeer int             `json:"early_dead_peer,omitempty"`
	ReapError     *hist.Histogram `json:"reap_error,omitempty"` // ns, observed - expected close
	// Idle connections with an answer to their last message (AckedAt): the
	// close error measured from the answer's arrival instead of the send,
	// and the send-to-answer time. ReapError (from the send) is an upper
	// bound of the reap lateness, since it includes the message's delivery
	// and the server's read queue; ReapErrorAck leaves those out and
	// subtracts the answer's return trip as well, so it can read low
	// (even negative) by that much.
	ReapErrorAck *hist.Histogram `json:"reap_error_ack,omitempty"` // ns, observed - (answer + idle)
	AckDelay     *hist.Histogram `json:"ack_delay,omitempty"`      // ns, answer - send of the last message
	// ReapErrorWire is the close error from the kernel's timestamp of the
	// server's FIN (ConnResult.WireFinAt) instead of the client's read of
	// it: the server's lateness alone, from the send.
	ReapErrorWire *hist.Histogram `json:"reap_error_wire,omitempty"` // ns, FIN - expected close

	Survivors int `json:"survivors,omitempty"` // expected to survive
	Survived  int `json:"survived,omitempty"`
	Pings     int `json:"pings,omitempty"`

	Ladder    []time.Duration   `json:"ladder,omitempty"`     // expected retransmission offsets
	GiveUpAt  time.Duration     `json:"give_up_at,omitempty"` // expected give-up offset
	RetxError []*hist.Histogram `json:"retx_error,omitempty"` // ns, per retransmission: observed - expected
	RetxCount map[int]int       `json:"retx_count,omitempty"` // connections by retransmissions seen

	// Hostile scenarios: what the server did with peers that misbehave.
	// The caller sets Hostile (and Limit) before adding results.
	Hostile      bool   `json:"hostile,omitempty"`
	Bytes        uint64 `json:"bytes,omitempty"`    // sent
	Writes       uint64 `json:"writes,omitempty"`   // write calls that sent them
	Mismatch     uint64 `json:"mismatch,omitempty"` // echoes that differed from what was sent
	ServerClosed int    `json:"server_closed,omitempty"`
	// CloseAfter is, for each connection the server closed, the time from
	// the start of its misbehaviour (connflood: its connect) to the close.
	CloseAfter *hist.Histogram `json:"close_after,omitempty"` // ns
	// Roles splits the figures by the connections' roles (pingflood:
	// reading and not_reading; garbage: random, bad_type, huge_length).
	Roles map[string]*Role `json:"roles,omitempty"`
	// Limit is the server's connection limit connflood was told (0: none);
	// more connections held open than that is a failed check, and so,
	// framed, is refusing more than the connections beyond it (an
	// overload close of a connection the limit had room for).
	Limit int `json:"limit,omitempty"`
	// CloseWithin is, for the scenarios whose connections the server must
	// close (nonreader, pingflood), how long after its misbehaviour began
	// each close must come: the sending window. 0: not bounded beyond
	// being seen at all.
	CloseWithin time.Duration `json:"close_within,omitempty"`
	// Unjudged says why the scenario's own check (see NotApplicable) was
	// not made in this run: nonreader when the flood was too small to take
	// the server past its output limit. "": it was.
	Unjudged string `json:"unjudged,omitempty"`
	// FloodBytes is, for nonreader, the flood each connection sends at
	// most (-hostile-bytes); FloodedOpen counts the connections that sent
	// all of it and were not closed by the server (a failed check: the
	// server took more than its output limit and kept the connection), and
	// FloodCut those that neither sent it all nor were closed (the window
	// ended first, or the server stopped reading: nothing to judge).
	FloodBytes  int64 `json:"flood_bytes,omitempty"`
	FloodedOpen int   `json:"flooded_open,omitempty"`
	FloodCut    int   `json:"flood_cut,omitempty"`
	// FloodStoppedOpen counts the connections of FloodCut whose floods were
	// stopped when the server's memory passed its bound: still open when
	// the server had taken more than it should have (a failed check).
	FloodStoppedOpen int `json:"flood_stopped_open,omitempty"`
}

// Role is the figures of one role of a hostile scenario.
type Role struct {
	Conns        int             `json:"conns"`
	Opened       int             `json:"opened"`
	ServerClosed int             `json:"server_closed"`
	Ends         map[string]int  `json:"ends,omitempty"`
	CloseAfter   *hist.Histogram `json:"close_after,omitempty"` // ns
}

// role returns the named role's figures, adding them if new.
func (s *Scenario) role(name string) *Role {
	if s.Roles == nil {
		s.Roles = map[string]*Role{}
	}
	r := s.Roles[name]
	if r == nil {
		r = &Role{Ends: map[string]int{}, CloseAfter: &hist.Histogram{}}
		s.Roles[name] = r
	}
	return r
}

// Held returns how many connections stayed open until the harness closed
// them.
func (s *Scenario) Held() int { return s.Ends["client"] }

// NewScenario returns empty figures for a scenario.
func NewScenario(name string) *Scenario {
	return &Scenario{Name: name, DialErrors: map[string]int{}, Errors: map[string]int{},
		Ends: map[string]int{}, WrongReason: map[string]int{}, RetxCount: map[int]int{},
		Latency: &hist.Histogram{}, Connect: &hist.Histogram{}, ReapError: &hist.Histogram{},
		ReapErrorAck: &hist.Histogram{}, AckDelay: &hist.Histogram{}, ReapErrorWire: &hist.Histogram{}, CloseAfter: &hist.Histogram{}}
}

// Add folds one connection's outcome into s; t says what lateness and
// earliness are tolerated.
func (s *Scenario) Add(r ConnResult, t Timeouts) {
	s.Conns++
	var role *Role
	if s.Hostile {
		role = s.role(r.Role)
		role.Conns++
	}
	if r.DialErr != "" {
		s.DialErrors[r.DialErr]++
		return
	}
	s.Opened++
	if role != nil {
		role.Opened++
		if r.End != "" {
			role.Ends[r.End]++
		}
		s.Bytes += r.Bytes
		s.Writes += r.Writes
		s.Mismatch += r.Mismatch
		closed := !r.ClosedAt.IsZero() && !r.Misbehaved.IsZero() && r.End != EndClient && r.End != EndBadServerFrame
		if closed {
			s.ServerClosed++
			role.ServerClosed++
			s.CloseAfter.Record(int64(r.ClosedAt.Sub(r.Misbehaved)))
			role.CloseAfter.Record(int64(r.ClosedAt.Sub(r.Misbehaved)))
		}
		switch {
		case s.FloodBytes <= 0 || closed:
		case r.Bytes >= uint64(s.FloodBytes):
			s.FloodedOpen++
		default:
			s.FloodCut++
		}
	}
	s.Connect.Record(int64(r.Connect))
	s.Sent += r.Sent
	s.Recv += r.Recv
	s.Lost += r.Lost
	if r.Err != "" {
		s.Errors[r.Err]++
	}
	if r.End != "" {
		s.Ends[r.End]++
	}
	s.Pings += r.Pings
	if r.Survivor {
		s.Survivors++
		if r.End == "client" {
			s.Survived++
		}
	}
	if r.Expect != "" {
		s.Expect = r.Expect
		s.Expected++
		switch {
		case r.ClosedAt.IsZero():
			s.NeverReaped++
		case r.ClosedAt.Sub(r.ExpectedAt) > t.Slack:
			s.Late++
		case r.End != r.Expect && !(r.End == "eof" && s.Proto == "raw" && rawTimeout[r.Expect]): // a raw server closes with EOF; a framed one must say why
			s.WrongReason[r.End]++
		default:
			s.Reaped++
		}
		if !r.ClosedAt.IsZero() {
			e := r.ClosedAt.Sub(r.ExpectedAt)
			s.ReapError.Record(int64(e))
			if e < -max(t.Tick, time.Millisecond) {
				s.Early++
				if r.End == "dead_peer" && r.Expect != "dead_peer" {
					s.EarlyDeadPeer++
				}
			}
			if !r.WireFinAt.IsZero() {
				s.ReapErrorWire.Record(int64(r.WireFinAt.Sub(r.ExpectedAt)))
			}
			if r.Expect == "idle" && !r.AckedAt.IsZero() && t.Idle > 0 {
				s.ReapErrorAck.Record(int64(r.ClosedAt.Sub(r.AckedAt.Add(t.Idle))))
				s.AckDelay.Record(int64(r.AckedAt.Sub(r.ExpectedAt.Add(-t.Idle))))
			}
		}
	}
	if r.Role == "retransmit" {
		s.RetxCount[len(r.Retx)]++
		for k, off := range r.Retx {
			for len(s.RetxError) <= k {
				s.RetxError = append(s.RetxError, &hist.Histogram{})
			}
			var want time.Duration
			if k < len(s.Ladder) {
				want = s.Ladder[k]
			}
			s.RetxError[k].Record(int64(off - want))
		}
	}
}

// rawTimeout holds the expected closes a raw server can give, with an EOF
// that says no reason: its idle timeout, its handshake timeout and its
// request (frame) deadline. A dead peer needs the framed protocol's PINGs.
var rawTimeout = map[string]bool{"idle": true, "handshake": true, "frame_deadline": true}

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

// Verdict is the memory's failed check, if any: a growth beyond the bound.
// Unjudged (no figures) there is nothing to judge.
func (m *Memory) Verdict() []string {
	if m == nil || m.Unjudged() != "" {
		return nil
	}
	if g, b := m.Growth(), m.Bound.Total(); g > b {
		return []string{fmt.Sprintf("the server's memory grew by %s, beyond its bound of %s", MiB(g), MiB(b))}
	}
	return nil
}

// MiB formats bytes in MiB with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

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
	CPUs    int           `json:"cpus"`
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

// merge adds o's figures to l's.
func (l *SelfLag) merge(o *SelfLag) {
	l.Lag.Merge(o.Lag)
	l.Stalled += o.Stalled
	l.Wall += o.Wall
	l.CPUs = max(l.CPUs, o.CPUs)
	l.OwnCPU += o.OwnCPU
	l.OtherCPU += o.OtherCPU
	l.StealCPU += o.StealCPU
	l.ServerCPU += o.ServerCPU
	if l.Err == "" {
		l.Err = o.Err
	}
}

// Result is one run of the harness, or a merge of several shards.
type Result struct {
	Version   int         `json:"version"`
	Config    Config      `json:"config"`
	Shards    []string    `json:"shards"` // "i/n" of each merged run
	Start     time.Time   `json:"start"`
	End       time.Time   `json:"end"`
	Limits    []string    `json:"limits,omitempty"` // what stopped the run reaching its target
	Notes     []string    `json:"notes,omitempty"`
	Server    *Server     `json:"server,omitempty"`
	Process   *Process    `json:"process,omitempty"`
	Remote    *Remote     `json:"remote,omitempty"` // -metrics: the external server's leak check
	Memory    *Memory     `json:"memory,omitempty"` // with hostile scenarios: the server's memory growth
	Scenarios []*Scenario `json:"scenarios"`
	// SelfLag is the harness's own scheduling over the run; nil in
	// results written before it was measured.
	SelfLag *SelfLag `json:"self_lag,omitempty"`
	// Judgement is what the figures judge, written by JSON for readers of
	// the file; nil otherwise (Judge and Failures compute it).
	Judgement *Judgement `json:"judgement,omitempty"`

	// CloseDelay is the server's own account of its timeout closes
	// (CloseDelayMetric): for each connection a timeout closed, from the
	// deadline on the server's clock to its event loop closing it. Embedded
	// netwheel runs read it at the end of the run; -metrics runs take the
	// difference of the readings before and after the run, which also
	// counts other clients' closes in between. Nil if the server does not
	// export it (baselines, other servers).
	CloseDelay *ServerHistogram `json:"close_delay,omitempty"`
}

// Scenario returns the named scenario's figures, or nil.
func (r *Result) Scenario(name string) *Scenario {
	for _, s := range r.Scenarios {
		if s.Name == name {
			return s
		}
	}
	return nil
}
