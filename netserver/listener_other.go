//go:build !linux

package netserver

import (
	"errors"
	"net"
)

var errNoRetire = errors.New("netserver: closing the listener before the connections is supported on Linux only")

type listenerID struct{}

// perLoopListeners: elsewhere than Linux, SO_REUSEPORT does not balance
// connections across sockets, so gnet keeps its single listener.
const perLoopListeners = false

// checkAddr leaves the checks to gnet's own bind.
func checkAddr(addr string) (string, error) { return addr, nil }

// findListeners is Linux-only; elsewhere Shutdown keeps the listener open
// until the engine stops and refuses new connections with ReasonShutdown.
func findListeners(net.Addr) ([]listenerID, error) { return nil, errNoRetire }

func retireListener(listenerID) error { return errNoRetire }
