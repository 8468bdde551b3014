//go:build !linux

package netserver

import (
	"errors"
	"net"
)

var errNoRetire = errors.New("netserver: closing the listener before the connections is supported on Linux only")

type listenerID struct{}

// findListeners is Linux-only; elsewhere Shutdown keeps the listener open
// until the engine stops and refuses new connections with ReasonShutdown.
func findListeners(net.Addr) ([]listenerID, error) { return nil, errNoRetire }

func retireListener(listenerID) error { return errNoRetire }
