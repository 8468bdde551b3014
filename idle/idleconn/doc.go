// Package idleconn enforces package idle's timeouts on the net.Conns of a
// goroutine-per-connection server on the standard library: WrapListener
// and WrapConn do an idle.Tracker's bookkeeping in Read and Write, on a
// shared wheel.Wheel, and close expired connections, replacing a
// SetReadDeadline before every Read. The wrapped Conn keeps the interfaces
// io.Copy and net/http look for, so that copies still splice or sendfile
// (see Conn).
//
// With TLS, put the wrapper below it: WrapListener around the TCP
// listener, NewTLSListener around that, and http.Server.Serve (not
// ServeTLS) on the result (see WrapListener). The wrapper closes an expired
// connection abruptly, with no GOAWAY: with net/http, keep
// http.Server.IdleTimeout below idle.Config.IdleTimeout, so that idle
// connections are closed gracefully and this package is the backstop for
// peers that are silent or slow at the byte level.
//
// When not to use it: for a handful of connections, net.Conn deadlines are
// simpler and exact; on an event loop (gnet), use package netserver, or an
// idle.Tracker directly.
package idleconn
