package netserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/netwheel/netwheel/netserver/frame"
)

// Shutdown stops the server gracefully. First it stops accepting: on Linux
// it closes the listening sockets at once, so new connections are refused
// (or, with ReusePort, go to the other sockets of the group, in other
// processes) while existing ones drain; elsewhere new ones are closed on
// arrival with ReasonShutdown. Then it drains the open connections until
// ctx is done. Framed: it sends each a GOAWAY with the time left before
// ctx's deadline (docs/protocol.md, "Going away") and goes on serving it
// (echoes, acknowledgements, retransmissions, keepalive); a connection
// closes, after CLOSE with code 2 (shutdown), once the peer has answered
// with its own GOAWAY, or read it, and nothing is unfinished (no frame half
// received, nothing unacknowledged or queued). With SilentShutdown, or
// Raw, nothing is sent and a connection closes once nothing is unfinished.
// Every close is counted and logged with ReasonShutdown.
//
// Every wait is bounded by ctx. If ctx ends first, Shutdown cuts the
// connections left (Framed: after CLOSE code 2, unless SilentShutdown),
// which are counted in Stats.Cut and each logged at info level, asks the
// engine to stop and returns ctx's error without waiting for it; Done is
// closed once the cut connections are closed, the engine and the wheel
// have stopped, and after that no goroutine or timer of the server
// remains. A process that exits after Shutdown should wait for Done
// (briefly: the cut takes milliseconds), or the cut connections are
// neither told, counted nor logged. Shutdown is idempotent: later calls
// return the first one's result.
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
	// Tell every connection, closing those already finished; the others
	// close as they finish: most do so on their own traffic (OnTraffic
	// checks), but one whose output drains with no more input would not,
	// so look again every 20ms.
	grace := frame.MaxGrace
	if deadline, ok := ctx.Deadline(); ok {
		grace = time.Until(deadline)
	}
	s.onLoops(func(c *Conn) {
		c.goAway(ReasonShutdown, grace)
		c.finishAway()
	})
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
			s.onLoops((*Conn).finishAway)
		case <-ctx.Done():
			err = ctx.Err()
			s.log.Warn("netserver: shutdown deadline passed, cutting the connections left", "open", s.open.Load())
			s.onLoops(cutConn)
			break wait
		}
	}
	// gnet closes whatever is left. Only ask it to stop, and wait for Done:
	// gnet's Stop would look whether the engine has stopped every 500 ms,
	// adding up to that to every drain.
	asked, ask := context.WithCancel(ctx)
	ask()
	if serr := s.eng.Stop(asked); serr != nil && !errors.Is(serr, context.Canceled) && err == nil {
		err = fmt.Errorf("netserver: stop engine: %w", serr)
	}
	select {
	case <-s.done:
		s.log.Info("netserver: stopped", "accepted", s.accepted.Load(), "cut", s.cuts.Load())
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
		s.log.Warn("netserver: shutdown deadline passed before the event loops stopped; they stop in the background (see Done)")
	}
	return err
}

// cut stops the server at once: no new connections, every open one
// cut, the engine asked to stop (Done closes when it has).
func (s *Server) cut(ctx context.Context) {
	select {
	case <-s.done:
		return
	default:
	}
	s.draining.Store(true)
	s.stopAccepting()
	s.onLoops(cutConn)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_ = s.eng.Stop(canceled) // only asks
}

// cutConn closes c with ReasonShutdown, marked as cut for OnClose, which
// counts it in Stats.Cut and logs it. On the loop.
func cutConn(c *Conn) {
	if !c.closing {
		c.flags.Or(flagCut)
		c.closeWith(ReasonShutdown)
	}
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

// onLoops has every event loop run f on each of its connections, and
// write out what f sent; f may close the connection. It returns once the
// tasks are queued; gnet runs a loop's tasks in order, before the engine's
// stop.
func (s *Server) onLoops(f func(*Conn)) {
	for _, l := range *s.loops.Load() {
		_ = l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			// From the end: a close removes c, moving the last
			// connection, already seen, to c's slot.
			for i := len(l.conns) - 1; i >= 0; i-- {
				if i < len(l.conns) {
					f(l.conns[i])
				}
			}
			l.flushOwner()
			return nil
		}))
	}
}

func (s *Server) checkDrained() {
	if s.draining.Load() && s.open.Load() == 0 {
		s.drainedOnce.Do(func() { close(s.drained) })
	}
}
