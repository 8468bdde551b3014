// Package idle enforces the timeouts of network connections on a shared
// timing wheel (package wheel): idle and read-silence timeouts, keepalive
// probes, frame (slowloris) and handshake deadlines, max connection age with
// jitter and grace, and a write-stall timeout. Each close carries a Reason
// fit to be logged and counted.
//
// A server creates one Tracker per connection with NewTracker and reports
// events to it: Activity, BytesIn (or both at once, Received), FrameStart and
// FrameEnd, HandshakeDone, Written and Drained. These per-packet calls are
// O(1), lock-free and allocation-free: they stamp the event with the
// wheel's clock (one monotonic read, about 26 ns, or a time the caller
// already holds, with the At variants) and never touch the wheel while
// traffic flows. The Tracker calls back (Hooks) on the wheel's goroutine to
// send a keepalive probe, to tell an old connection to go away, and once
// to close it.
//
// WriteStall is the write-stall decision as pure logic: a connection's
// queued output stalls when it makes no progress (bytes drained from the
// queue, or acknowledged by the peer) for a timeout. A server that watches
// its own output queue tells it what it sees (netserver does); a Tracker's
// write-stall timeout (Written, Drained) is decided by one too.
//
// Package idleconn wraps the net.Conns of a goroutine-per-connection server
// on the standard library in Trackers.
//
// Zero values follow netwheel's one rule (see Config): the zero Config
// keeps any peer from holding a connection for ever.
//
// Package idle is pure logic over wheel timers: it knows no socket, reads
// no system clock of its own, and tests drive it deterministically with a
// wheel.ManualClock.
//
// When not to use it: for a handful of connections, net.Conn deadlines are
// simpler and exact; for sub-tick precision, use time.Timer.
package idle
