// Package idle enforces the timeouts of network connections on a shared
// timing wheel (package wheel): idle and read-silence timeouts, keepalive
// probes, frame (slowloris) and handshake deadlines, max connection age with
// jitter and grace, and a write-stall timeout. Each close carries a Reason
// fit to be logged and counted.
//
// A server creates one Tracker per connection with New and reports events
// to it: Activity, BytesIn (or both at once, Received), FrameStart and
// FrameEnd, HandshakeDone, Written and Drained. These per-packet calls are
// O(1), lock-free and allocation-free, read only the wheel's coarse clock
// and mostly cost a load and a compare; they never touch the wheel while
// traffic flows. The Tracker calls back (Hooks) on the wheel's goroutine to
// send a keepalive probe, to drain an old connection, and once to close it.
//
// For a goroutine-per-connection server on the standard library, WrapListener
// and WrapConn do the bookkeeping in Read and Write and close expired
// connections, replacing a SetReadDeadline before every Read.
//
// Package idle is pure logic over wheel timers: it reads no system clock of
// its own, and tests drive it deterministically with a wheel.ManualClock.
//
// When not to use it: for a handful of connections, net.Conn deadlines are
// simpler and exact; for sub-tick precision, use time.Timer.
package idle
