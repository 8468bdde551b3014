// Package report holds the load-test harness's results: the per-connection
// outcomes an attack streams out (ConnResult), the per-scenario figures they
// fold into (Scenario, add.go), the whole run (Result), its judgement
// computed once as data (Judge, judge.go), and the renderers of both, which
// are plain functions: Text, SVG, HTML and JSON, plus Merge for results of
// several shards. docs/results.md documents the JSON form.
//
// Every type here is plain data owned by one goroutine at a time.
package report

import (
	"reflect"
	"time"

	"github.com/netwheel/netwheel/internal/hist"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
)

// Version is the version of the JSON result format (docs/results.md): any
// change of a field's meaning, name or presence bumps it, and ReadJSON
// reads only this version.
const Version = 2

// Timeouts describes the server's timer configuration: what the harness
// expects. Zero means "off" (see the flags' rule in loadtest -h).
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
	// nothing is closed. 0: none known.
	Handshake time.Duration `json:"handshake"`
	Tick      time.Duration `json:"tick"`  // the server wheel's tick: early-close tolerance
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
	Target    string         `json:"target"` // "embedded HOST:PORT" or HOST:PORT
	Server    string         `json:"server"` // netwheel (embedded) or external
	Proto     string         `json:"proto"`  // raw or framed
	Scenarios []string       `json:"scenarios"`
	Conns     map[string]int `json:"conns"` // requested, per scenario, all shards
	Rate      float64        `json:"rate"`  // echo messages/s per connection
	Size      int            `json:"size_bytes"`
	Duration  time.Duration  `json:"duration"`
	Closed    bool           `json:"closed_loop"`
	ChurnRate float64        `json:"churn_rate"` // connections/s
	Timeouts  Timeouts       `json:"timeouts"`
	// Known, for an external server, is what the flags told of its
	// timeouts: Timeouts with the fields no flag gave zeroed.
	Known *Timeouts `json:"known_timeouts,omitempty"`
	// Payload and Expect describe a raw protocol other than echo: each
	// message's bytes and what its answer must be (as -expect takes it);
	// both "" for an echo server.
	Payload string `json:"payload,omitempty"`
	Expect  string `json:"expect,omitempty"`
	// CloseHorizon is how long after its expected close a connection
	// waited for the server's close (-close-horizon).
	CloseHorizon time.Duration `json:"close_horizon"`
}

// ConnResult is what one connection of an attack reports when it ends. It
// is not written to results.
type ConnResult struct {
	Scenario string
	Role     string        // the scenario's name, or a role of scenario.All's
	DialErr  string        // kind of dial failure (fd_limit, ephemeral_ports, ...); "" if connected
	Connect  time.Duration // dial time
	OpenedAt time.Time     // when the dial completed
	Sent     uint64        // messages sent
	Recv     uint64        // answers received
	Err      string        // kind of error that ended it early, if any
	Lost     uint64        // messages sent but never answered
	// End says how it ended: a close reason from the server's CLOSE frame
	// (idle, dead_peer, ...), "eof" or "reset" when the server closed without
	// one, EndClient when the harness closed it, EndBadServerFrame when the
	// harness gave up on bytes from the server it could not parse.
	End string
	// Expect is the close reason the connection's timer must end in, set
	// once its timer started ("" if it never did, or it expects none).
	// The server last saw activity somewhere between the last byte the
	// client sent and the last byte of the server's answer it received:
	// ExpectedAt is the close that window's start gives, ExpectedBy the
	// one its end gives (zero: no answer, the window is a point).
	Expect     string
	ExpectedAt time.Time
	ExpectedBy time.Time
	ClosedAt   time.Time // when the server's close was seen; zero if it was not
	// WireFinAt is, with a capture of the loopback (loadtest -fins), when
	// the kernel passed the server's FIN to this connection. Zero if not
	// captured.
	WireFinAt time.Time
	// Refusal is, for a connection the server closed before its scenario
	// could start and that got bytes that are no answer (a server at its
	// connection limit: memcached's "ERROR Too many open connections", an
	// HTTP 503), the first line of those bytes, Go-quoted and bounded.
	Refusal  string
	Pings    int // pings received
	Retx     []time.Duration
	Survivor bool // expected to stay open until the harness closes it

	// Hostile connections: when the misbehaviour began (zero for polite
	// ones), the bytes and writes sent, and the answers that differed from
	// what was expected (every scenario).
	Misbehaved time.Time
	Bytes      uint64
	Writes     uint64
	Mismatch   uint64
}

// Ends of a connection that are not a close by the server (ConnResult.End).
const (
	EndClient = "client" // the harness closed it
	// EndBadServerFrame: the server sent bytes the client could not parse
	// (framed), and the client closed.
	EndBadServerFrame = "bad_server_frame"
)

// Closes counts a scenario's connections that a server timeout must close,
// each in exactly one bucket: the buckets add up to Expected.
type Closes struct {
	Expect   string `json:"expect"`   // the close reason expected
	Expected int    `json:"expected"` // connections that expected it (dial failures included)
	OnTime   int    `json:"on_time"`  // closed within the window, for the right reason
	// Late: closed more than the slack after the deadline counted from
	// the window's end (the latest the server saw activity).
	Late int `json:"late"`
	// Never: not closed within the horizon after the window's end.
	Never int `json:"never"`
	// Early: closed more than a tick before the deadline counted from the
	// window's start (the earliest the server saw activity);
	// EarlyDeadPeer of them as dead peers although not expected to be.
	Early         int `json:"early"`
	EarlyDeadPeer int `json:"early_dead_peer"`
	// OtherReason: closed in time but for another reason.
	OtherReason map[string]int `json:"other_reason,omitempty"`
	// Refused: closed by the server before the scenario could start, with
	// bytes that were no answer; Refusal quotes the first.
	Refused int    `json:"refused"`
	Refusal string `json:"refusal,omitempty"`
	// NotStarted: ended otherwise before the timer could start (a dial
	// that failed, a close without a word, a message never answered).
	NotStarted int `json:"not_started"`

	// Close errors of the connections closed, in ns: observed close minus
	// the deadline from the window's start (FromStart, which the early
	// check uses) and from its end (FromEnd, the late check's); Window is
	// the window's width (the answer's delay). LateBy and EarlyBy hold the
	// late ones' lateness and the early ones' earliness only. Wire is the
	// close error from the kernel's timestamp of the server's FIN (-fins),
	// from the window's start.
	FromStart *hist.Histogram `json:"close_error_from_start_ns"`
	FromEnd   *hist.Histogram `json:"close_error_from_end_ns"`
	Window    *hist.Histogram `json:"window_ns"`
	LateBy    *hist.Histogram `json:"late_by_ns"`
	EarlyBy   *hist.Histogram `json:"early_by_ns"`
	Wire      *hist.Histogram `json:"close_error_wire_ns,omitempty"`
}

// Sum returns the buckets added up, which is Expected.
func (c *Closes) Sum() int {
	return c.OnTime + c.Late + c.Never + c.Early + sum(c.OtherReason) + c.Refused + c.NotStarted
}

// Scenario is the figures of one scenario.
type Scenario struct {
	Name string `json:"name"`
	// NotApplicable says why the scenario was not run and not judged in
	// this run ("": it was); set from scenario.Spec.NotApplicable.
	NotApplicable string `json:"not_applicable,omitempty"`
	Hostile       bool   `json:"hostile"`
	Proto         string `json:"proto"` // raw or framed
	// AnswerWait is how long the harness waited for an answer before it
	// counted the message lost, DialWait for a connection to open.
	AnswerWait time.Duration  `json:"answer_wait" merge:"max"`
	DialWait   time.Duration  `json:"dial_wait" merge:"max"`
	Conns      int            `json:"conns"`  // connections attempted
	Opened     int            `json:"opened"` // connected
	DialErrors map[string]int `json:"dial_errors,omitempty"`
	Elapsed    time.Duration  `json:"elapsed" merge:"max"` // the sending window, for rates
	Sent       uint64         `json:"sent"`                // messages
	Recv       uint64         `json:"answered"`
	Lost       uint64         `json:"lost"`
	Mismatch   uint64         `json:"mismatch"` // answers that differed from what was expected
	Errors     map[string]int `json:"errors,omitempty"`
	Ends       map[string]int `json:"ends,omitempty"` // how connections ended

	Latency *hist.Histogram `json:"latency_ns,omitempty"` // round trips
	Connect *hist.Histogram `json:"connect_ns,omitempty"` // dial times

	// Closes is the timer check, for a scenario whose connections a server
	// timeout must close; nil otherwise.
	Closes *Closes `json:"closes,omitempty"`
	// Horizon is how long after its expected close each connection waited
	// for the close.
	Horizon time.Duration `json:"horizon" merge:"max"`

	Survivors int `json:"survivors,omitempty"` // expected to survive
	Survived  int `json:"survived,omitempty"`
	Pings     int `json:"pings,omitempty"`

	Ladder    []time.Duration   `json:"ladder,omitempty"`                 // expected retransmission offsets
	GiveUpAt  time.Duration     `json:"give_up_at,omitempty" merge:"max"` // expected give-up offset
	RetxError []*hist.Histogram `json:"retx_error_ns,omitempty"`
	RetxCount map[int]int       `json:"retx_count,omitempty"` // connections by retransmissions seen

	// Hostile scenarios: what the server did with peers that misbehave.
	Bytes        uint64 `json:"bytes,omitempty"`  // sent
	Writes       uint64 `json:"writes,omitempty"` // write calls that sent them
	ServerClosed int    `json:"server_closed,omitempty"`
	// CloseAfter is, for each connection the server closed, the time from
	// the start of its misbehaviour (connflood: its connect) to the close.
	CloseAfter *hist.Histogram `json:"close_after_ns,omitempty"`
	// Roles splits the figures by the connections' roles.
	Roles map[string]*Role `json:"roles,omitempty"`
	// Limit is the server's connection limit connflood was told, or its
	// per-source limit sourceflood was (0: none).
	Limit int `json:"limit,omitempty" merge:"first"`
	// CloseWithin is, for nonreader and pingflood, how long after its
	// misbehaviour began each close must come: the sending window.
	CloseWithin time.Duration `json:"close_within,omitempty" merge:"max"`
	// FloodBytes is, for nonreader, the flood each connection sends at
	// most; FloodedOpen counts the connections that sent all of it and
	// were not closed, FloodCut those that neither sent it all nor were
	// closed, FloodStoppedOpen those of FloodCut whose floods were stopped
	// when the server's memory passed its bound.
	FloodBytes       int64 `json:"flood_bytes,omitempty" merge:"first"`
	FloodedOpen      int   `json:"flooded_open,omitempty"`
	FloodCut         int   `json:"flood_cut,omitempty"`
	FloodStoppedOpen int   `json:"flood_stopped_open,omitempty"`
}

// Role is the figures of one role of a hostile scenario.
type Role struct {
	Conns        int             `json:"conns"`
	Opened       int             `json:"opened"`
	ServerClosed int             `json:"server_closed"`
	Ends         map[string]int  `json:"ends,omitempty"`
	CloseAfter   *hist.Histogram `json:"close_after_ns,omitempty"`
}

// role returns the named role's figures, adding them if new.
func (s *Scenario) role(name string) *Role {
	r := s.Roles[name]
	if r == nil {
		r = fill(&Role{})
		s.Roles[name] = r
	}
	return r
}

// Held returns how many connections stayed open until the harness closed
// them.
func (s *Scenario) Held() int { return s.Ends[EndClient] }

// heldBy returns how many connections of role stayed open until the
// harness closed them.
func (s *Scenario) heldBy(role string) int {
	if ro := s.Roles[role]; ro != nil {
		return ro.Ends[EndClient]
	}
	return 0
}

// NewScenario returns empty figures for a scenario; expect is the close
// its connections must get from a server timeout ("" none).
func NewScenario(name, expect string) *Scenario {
	s := &Scenario{Name: name}
	if expect != "" {
		s.Closes = &Closes{Expect: expect}
	}
	return fill(s)
}

// NewScenarios returns the empty figures of the scenarios names of the
// run e describes, as the scenario table describes them, with the waits of
// w: Horizon, AnswerWait, DialWait, and CloseWithin (the floods' sending
// window and drain) for the scenarios that fill their output.
func NewScenarios(names []string, e scenario.Env, w Scenario) map[string]*Scenario {
	figs := map[string]*Scenario{}
	for _, s := range names {
		sp := scenario.Lookup(s)
		f := NewScenario(s, sp.Expect)
		f.Hostile, f.Proto, f.NotApplicable = sp.Hostile, e.Proto.String(), sp.NotApplicable(e)
		f.Horizon, f.AnswerWait, f.DialWait = w.Horizon, w.AnswerWait, w.DialWait
		switch s {
		case scenario.Retransmit:
			f.Ladder, f.GiveUpAt = e.Ladder, e.GiveUp
		case scenario.Connflood:
			f.Limit = e.MaxConns
		case scenario.Sourceflood:
			f.Limit = e.MaxConnsPerSource
		case scenario.Nonreader:
			f.FloodBytes = e.HostileBytes
		}
		if sp.FillsOutput {
			f.CloseWithin = w.CloseWithin
		}
		figs[s] = f
	}
	return figs
}

// Result is one run of the harness, or a merge of several shards.
type Result struct {
	Version int       `json:"version"`
	Config  Config    `json:"config"`
	Shards  []string  `json:"shards"` // "i/n" of each merged run
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Limits  []string  `json:"limits,omitempty"` // what stopped the run reaching its target
	Notes   []string  `json:"notes,omitempty"`
	// Leaks are what the leak check found still held after every client
	// closed: each a failed judgement.
	Leaks     []string    `json:"leaks,omitempty"`
	Server    *Server     `json:"server,omitempty"`
	Process   *Process    `json:"process,omitempty"`
	Remote    *Remote     `json:"remote,omitempty"` // -metrics: the external server's leak check
	Memory    *Memory     `json:"memory,omitempty"` // with hostile scenarios: the server's memory growth
	Scenarios []*Scenario `json:"scenarios"`
	SelfLag   *SelfLag    `json:"self_lag,omitempty"`
	// Judgement is the result's judgement as JSON writes it (Judge); it is
	// computed from the figures and ignored when read.
	Judgement *Judgement `json:"judgement,omitempty"`
	// CloseDelay is the server's own account of its timeout closes
	// (netserver's timeout_close_delay_seconds); nil if the server does not export it.
	CloseDelay *ServerHistogram `json:"close_delay,omitempty"`
}

// fill gives the figures p points to an empty map or histogram wherever
// they have none, through nested figures (a nil *Closes stays nil: no
// timer check), so that Add and the renderers never meet a nil one.
func fill[T any](p *T) *T {
	fillValue(reflect.ValueOf(p).Elem())
	return p
}

func fillValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i))
			}
		}
	case reflect.Pointer:
		if v.Type() == histType && v.IsNil() {
			v.Set(reflect.ValueOf(&hist.Histogram{}))
		} else if v.Type() != histType && !v.IsNil() {
			fillValue(v.Elem())
		}
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for it := v.MapRange(); it.Next(); {
			if it.Value().Kind() == reflect.Pointer {
				fillValue(it.Value())
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			fillValue(v.Index(i))
		}
	}
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
