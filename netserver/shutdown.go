package netserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Shutdown stops the server gracefully. First it stops accepting: on Linux
// it closes the listening sockets at once, so new connections are refused
// (or, with ReusePort, go to the other sockets of the group, in other
// processes) while existing ones drain; elsewhere new ones are closed on
// arrival with ReasonShutdown. Then it closes idle connections (Framed:
// after a CLOSE frame, unless SilentShutdown), lets busy ones (a frame half
// received, data unacknowledged or queued) finish until ctx is done, closes
// the rest, and stops the event loops and the wheel.
//
// Every wait is bounded by ctx. If ctx ends first, Shutdown cuts the busy
// connections, asks the engine to stop and returns ctx's error without
// waiting for it; Done is closed once the engine and the wheel have stopped,
// and after that no goroutine or timer of the server remains. Shutdown is
// idempotent: later calls return the first one's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

// ErrServerClosed is returned by Start after Shutdown.
var ErrServerClosed = errors.New("netserver: server closed")

func (s *Server) shutdown(ctx context.Context) error {
	s.shutdownCalled.Store(true)
	if s.started.CompareAndSwap(false, true) { // never started: it never will
		s.draining.Store(true)
		close(s.done)
		close(s.startDone)
		return nil
	}
	select { // a Start under way finishes first
	case <-s.startDone:
	case <-ctx.Done():
		// Out of time already: stop it as soon as it has started.
		go func() {
			<-s.startDone
			s.cut(context.Background())
		}()
		return ctx.Err()
	}
	select {
	case <-s.done: // never booted, or already stopped
		return nil
	default:
	}
	s.draining.Store(true)
	s.stopAccepting()
	s.checkDrained()
	// Close the idle connections now, and the busy ones as they become
	// idle: most do so on their own traffic (OnTraffic checks), but one
	// whose output drains with no more input would not, so look again
	// every 20ms.
	closeIdle := func() { s.closeOnLoops((*Conn).isIdle) }
	closeIdle()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case <-s.drained:
			break wait
		case <-tick.C:
			s.checkDrained()
			closeIdle()
		case <-ctx.Done():
			err = ctx.Err()
			s.log.Warn("netserver: shutdown deadline passed, closing busy connections", "open", s.open.Load())
			s.closeOnLoops(func(*Conn) bool { return true })
			break wait
		}
	}
	// gnet closes whatever is left; with ctx done, Stop only asks.
	if serr := s.eng.Stop(ctx); serr != nil && err == nil {
		err = fmt.Errorf("netserver: stop engine: %w", serr)
	}
	select {
	case <-s.done:
		s.log.Info("netserver: stopped", "accepted", s.accepted.Load())
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
		s.log.Warn("netserver: shutdown deadline passed before the event loops stopped; they stop in the background (see Done)")
	}
	return err
}

// cut stops the server at once: no new connections, every open one
// closed, the engine asked to stop (Done closes when it has).
func (s *Server) cut(ctx context.Context) {
	select {
	case <-s.done:
		return
	default:
	}
	s.draining.Store(true)
	s.stopAccepting()
	s.closeOnLoops(func(*Conn) bool { return true })
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_ = s.eng.Stop(canceled) // only asks
}

// stopAccepting closes the server's listening sockets, leaving gnet a
// harmless descriptor in their place (retireListener). Where that cannot be
// done, OnOpen goes on closing new connections with ReasonShutdown.
func (s *Server) stopAccepting() {
	select {
	case <-s.done: // gnet has closed the listeners, and their descriptors may be reused
		return
	default:
	}
	var err error
	if len(s.listeners) == 0 {
		_, err = findListeners(s.addr) // says why: not Linux, or none found
		if err == nil {
			err = errors.New("netserver: no listening socket of the server found")
		}
	}
	for _, id := range s.listeners {
		if rerr := retireListener(id); rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		s.log.Warn("netserver: shutdown: could not close the listener first; new connections are closed on arrival instead", "err", err)
		return
	}
	s.log.Info("netserver: shutdown: stopped accepting", "addr", s.addr.String(), "listeners", len(s.listeners))
}

// closeOnLoops asks every event loop to close, with ReasonShutdown, its
// connections for which which returns true.
func (s *Server) closeOnLoops(which func(*Conn) bool) {
	for _, l := range *s.loops.Load() {
		_ = l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			// From the end: a close removes c, moving the last
			// connection, already seen, to c's slot.
			for i := len(l.conns) - 1; i >= 0; i-- {
				if i < len(l.conns) {
					if c := l.conns[i]; which(c) {
						c.closeWith(ReasonShutdown)
					}
				}
			}
			return nil
		}))
	}
}

func (s *Server) checkDrained() {
	if s.draining.Load() && s.open.Load() == 0 {
		s.drainedOnce.Do(func() { close(s.drained) })
	}
}
