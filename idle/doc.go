// Package idle enforces the timeouts of network connections on a shared
// timing wheel (package wheel): idle and read-silence timeouts, keepalive
// probes, frame (slowloris) and handshake deadlines, max connection age with
// jitter and grace, and a write-stall timeout. Each close carries a Reason
// fit to be logged and counted.
//
// A server creates one Tracker per connection with New and reports events
// to it: Activity, BytesIn (or both at once, Received), FrameStart and
// FrameEnd, HandshakeDone, Written and Drained. These per-packet calls are
// O(1), lock-free and allocation-free: they stamp the event with the
// wheel's clock (one monotonic read, about 26 ns, or a time the caller
// already holds, with the At variants) and never touch the wheel while
// traffic flows. The Tracker calls back (Hooks) on the wheel's goroutine to
// send a keepalive probe, to drain an old connection, and once to close it.
//
// WriteStall is the write-stall decision as pure logic: a connection's
// queued output stalls when it makes no progress (bytes drained from the
// queue, or acknowledged by the peer) for a timeout. A server that watches
// its own output queue tells it what it sees (netserver does); a Tracker's
// write-stall timeout (Written, Drained) is decided by one too.
//
// For a goroutine-per-connection server on the standard library, WrapListener
// and WrapConn do the bookkeeping in Read and Write and close expired
// connections, replacing a SetReadDeadline before every Read. The wrapped
// Conn keeps the interfaces io.Copy and net/http look for (ReadFrom,
// WriteTo, CloseWrite, SyscallConn, the TCP settings), so that copies
// between sockets and files still splice or sendfile, and it records the
// bytes those move. A close error's Timeout says whether a timeout closed
// the connection (max age is not one).
//
// With TLS, put the wrapper below it: WrapListener around the TCP
// listener, NewTLSListener around that, and http.Server.Serve (not
// ServeTLS) on the result. net/http then sees each *tls.Conn: it runs the
// handshake under its own timeouts, sets Request.TLS and serves HTTP/2, and
// NewTLSListener clears the HandshakeTimeout once the handshake is through.
// Wrapping the connections of a TLS listener instead hides the *tls.Conn:
// Request.TLS is nil and HTTP/2 is off (see WrapListener). The wrapper
// closes an expired connection abruptly, with no GOAWAY: with net/http,
// keep http.Server.IdleTimeout below Config.IdleTimeout, so that idle
// connections are closed gracefully and this package is the backstop for
// peers that are silent or slow at the byte level.
//
// Zero values follow one rule, as everywhere in netwheel: a zero Config
// field means the default it documents (the Default* constants, which keep
// any peer from holding a connection for ever), Off (exactly -1) turns the
// setting off, and any other negative value is an error naming the field. Config.WithDefaults shows what a Config resolves
// to.
//
// Package idle is pure logic over wheel timers: it reads no system clock of
// its own, and tests drive it deterministically with a wheel.ManualClock.
//
// When not to use it: for a handful of connections, net.Conn deadlines are
// simpler and exact; for sub-tick precision, use time.Timer.
package idle
