package scenario

import "fmt"

// kernelBuffering is what the client's send buffer and the server's
// receive and send buffers may hold of a non-reader's flood on loopback,
// beyond what the server queues: a raw server need not close a non-reader
// whose flood is no larger than its output limit and this.
const kernelBuffering = 8 << 20

// All is every scenario, in report order: the polite ones, then the
// hostile ones. To add one, add a row here and its role in attack's
// engine (attack.Run's switch on roles); the flags, the plan, the judge
// and the reports read the row.
var All = []Spec{
	{Name: Echo, Answered: true, Doc: "open-loop paced messages (-rate, -size) for -duration; latency and lost messages",
		flags: func(e Env) string { return sendsBeforeHandshake(Echo, e, 1) },
		notApplicable: func(e Env) string {
			if e.Proto == Raw && !e.CountedAnswers {
				return fmt.Sprintf("echo counts and times each message's answer, and with -expect %s answers cannot be told apart", e.Expect)
			}
			return ""
		}},
	{Name: Idle, Expect: "idle", Answered: true, Timeouts: []string{"idle"}, Doc: "one message, then silence: the idle timeout (-idle) must close it",
		quiet: func(int) bool { return true },
		flags: func(e Env) string {
			if e.Idle == 0 {
				return "the idle scenario needs -idle > 0"
			}
			return ""
		}},
	{Name: Handshake, Expect: "handshake", Doc: "sends nothing: the handshake timeout (-handshake) must close it",
		notApplicable: func(e Env) string {
			if e.External && e.Handshake == 0 {
				return "the server's handshake timeout is not known: give it with -handshake (how long after it opened a connection that sends nothing is closed)"
			}
			return ""
		},
		byDefault: func(e Env) bool { return e.Handshake > 0 },
		flags: func(e Env) string {
			switch {
			case e.Handshake == 0:
				return "the handshake scenario needs -handshake > 0, the server's handshake timeout"
			case e.KnownIdle > 0 && e.Handshake >= e.KnownIdle:
				return fmt.Sprintf("the handshake scenario needs -handshake (%s) below -idle (%s), or its silent connections die idle", e.Handshake, e.KnownIdle)
			case e.Proto == Framed && e.KnownDeadPeerAfter > 0 && e.Handshake >= e.KnownDeadPeerAfter:
				// A PONG is a frame, which would complete the handshake:
				// the silent connections do not answer PINGs.
				return fmt.Sprintf("the handshake scenario needs -handshake (%s) below keepalive + count x timeout (%s), or its silent connections die as dead peers",
					e.Handshake, e.KnownDeadPeerAfter)
			}
			return ""
		}},
	{Name: Keepalive, Framed: true, Expect: "dead_peer", ExpectRole: RoleSilent, Answered: true,
		Timeouts: []string{"keepalive", "keepalive-timeout", "keepalive-count"},
		Doc:      "half answer PINGs and must survive, half go silent and must be closed as dead peers",
		role: func(_ Proto, i int) string {
			if i%2 == 1 {
				return RoleSilent
			}
			return RoleSurvivor
		},
		quiet: func(i int) bool { return i%2 == 1 },
		flags: func(e Env) string {
			switch {
			case e.KeepaliveTime == 0 || e.KeepaliveTimeout == 0:
				return "the keepalive scenario needs -keepalive and -keepalive-timeout > 0"
			case e.Idle > 0 && e.DeadPeerAfter >= e.Idle:
				return fmt.Sprintf("the keepalive scenario needs keepalive + count x timeout (%s) below -idle (%s), or silent peers die idle", e.DeadPeerAfter, e.Idle)
			}
			return ""
		}},
	{Name: Retransmit, Framed: true, Expect: "retransmit_give_up", Answered: true,
		Timeouts: []string{"rto", "min-rto", "max-rto", "max-retransmits", "give-up"},
		Doc:      "never acknowledges: the server must resend on the RFC 6298 ladder and give up",
		flags: func(e Env) string {
			switch {
			case e.LadderErr != nil:
				return fmt.Sprintf("retransmit flags: %v", e.LadderErr)
			case e.Idle > 0 && e.GiveUp >= e.Idle:
				return fmt.Sprintf("the retransmit scenario needs the give-up (%s) before -idle (%s)", e.GiveUp, e.Idle)
			}
			return ""
		}},
	{Name: Slowloris, Expect: "frame_deadline", Timeouts: []string{"frame-timeout"}, Doc: "trickles a message a byte at a time: the frame (request) deadline (-frame-timeout) must close it",
		notApplicable: func(e Env) string {
			switch {
			case e.Proto == Framed:
				return ""
			case !e.External:
				return "the embedded raw echo server has no request deadline (netserver has one only with HandlerMarks, a handler that marks its requests)"
			case e.Frame == 0:
				return "the server's request deadline is not known: give it with -frame-timeout (how long after its first byte an incomplete message is cut off)"
			case e.Size < 2:
				return "slowloris trickles a message without its last byte, and a message of 1 byte has none to hold back"
			}
			return ""
		},
		byDefault: func(e Env) bool { return e.Proto == Framed },
		flags: func(e Env) string {
			if e.Frame == 0 {
				return "the slowloris scenario needs -frame-timeout > 0"
			}
			return ""
		}},
	{Name: Churn, Answered: true, Doc: "connections opened at -churn-rate, each sends one message, waits for its answer and closes"},

	{Name: Nonreader, Hostile: true, FillsOutput: true, Doc: "floods messages and never reads: an output limit must close it",
		MustClose: &MustClose{What: "non-readers", Why: "a peer that does not read must be closed by an output limit"},
		notApplicable: func(e Env) string {
			limit, flag, above := e.OutputLimit, "-output-limit", int64(kernelBuffering)
			if e.Proto == Framed && e.UnackedLimit > 0 && e.UnackedLimit < limit {
				// Unacknowledged bytes count from the send, kernel buffers included.
				limit, flag, above = e.UnackedLimit, "-unacked-limit", 0
			}
			if limit <= 0 || e.HostileBytes > limit+above {
				return ""
			}
			buffers := ""
			if above > 0 {
				buffers = " plus " + MiB(above) + " the kernels' buffers may hold"
			}
			return fmt.Sprintf("-hostile-bytes %s is not above the server's limit %s (%s)%s, so a correct server need not close the non-readers",
				MiB(e.HostileBytes), MiB(limit), flag, buffers)
		}},
	{Name: Splitter, Hostile: true, Answered: true, Doc: "polite messages written cut at random byte boundaries, every echo checked byte for byte",
		flags: func(e Env) string {
			e.Closed = false // the splitter is always open loop
			return sendsBeforeHandshake(Splitter, e, 3)
		},
		notApplicable: func(e Env) string {
			if e.Proto == Raw && !e.EchoAnswers {
				return fmt.Sprintf("the splitter checks echoes byte for byte, and the server's answers are not echoes (-expect %s)", e.Expect)
			}
			return ""
		}},
	{Name: Pingflood, Hostile: true, Framed: true, FillsOutput: true, Doc: "floods PINGs (half read the PONGs): the ping rate limit must close it",
		MustClose: &MustClose{What: "ping flooders", Why: "PINGs beyond the ping rate limit must close the connection", Reasons: []string{"ping_flood"}},
		role: func(_ Proto, i int) string {
			if i%2 == 1 {
				return RoleNotReading
			}
			return RoleReading
		}},
	{Name: Connflood, Hostile: true, Alone: true, RefusalsExpected: true,
		Doc:       "opens connections beyond -max-conns and holds them: no more than the limit may stay open",
		byDefault: func(e Env) bool { return e.MaxConns > 0 }},
	{Name: Sourceflood, Hostile: true, Alone: true, RefusalsExpected: true, LimitRole: RoleFlooder, ServedRole: RoleNeighbour,
		Doc: "one source (-proxy's first client) holds connections beyond -max-conns-per-source while -conns other sources connect and echo: " +
			"the flooder may hold no more than its limit, every other source must be served",
		notApplicable: func(e Env) string {
			switch {
			case !e.Proxy:
				return "sourceflood plays many sources through one address with the PROXY protocol: give -proxy v1 or v2 (the server must require it)"
			case e.MaxConnsPerSource == 0:
				return "the server's per-source connection limit is not known: give it with -max-conns-per-source"
			}
			return ""
		}},
	{Name: Garbage, Hostile: true, Doc: "sends bytes that are no frame: the server must close it",
		// Random bytes may, rarely (about 1 in 65 000), start a valid
		// frame, which a server then closes at its frame deadline.
		MustClose: &MustClose{What: "garbage connections", Why: "bytes that are no frame must close the connection",
			Reasons: []string{"frame_too_large", "protocol_error", "frame_deadline"}},
		role: func(p Proto, i int) string {
			if p != Framed {
				return GarbageRandom // raw has no frames to break
			}
			return []string{GarbageRandom, GarbageBadType, GarbageHugeLength}[i%3]
		},
		notApplicable: func(e Env) string {
			if e.Proto == Raw {
				return "raw protocol: any bytes are a valid stream to answer, so there is nothing to close the connection for"
			}
			return ""
		}},
}

// MiB formats bytes in MiB with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
