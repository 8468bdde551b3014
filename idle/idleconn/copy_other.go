//go:build !linux

package idleconn

import "syscall"

// spliceCopy says whether ReadFrom and WriteTo splice between sockets: only
// Linux has splice, and there net.TCPConn.ReadFrom copies between sockets
// in user space too.
const spliceCopy = false

func queued(syscall.RawConn) (int, error) { panic("idleconn: queued without splice") }
