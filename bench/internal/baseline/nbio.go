package baseline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/logging"
)

// KindNbio is the nbio baseline: an nbio engine (event loops, as gnet)
// whose connections call nbio's own SetReadDeadline on every packet. nbio
// arms each deadline on one timer heap per engine, served by one goroutine;
// the table of docs/perf.md, "The server against its baselines", measures
// netwheel against it. It is here, and in bench's go.mod, for that
// comparison only: the product's module does not require nbio.
const KindNbio = "nbio"

// nbioServer is the nbio baseline. Ownership: eng and addr are set before
// startNbio returns, read-only after; counters are atomic.
type nbioServer struct {
	eng   *nbio.Engine
	addr  net.Addr
	idle  time.Duration
	delay *closeDelay
	counters
}

// nbioConn is one connection's state, in nbio's session. due is written
// on the poller goroutine and read in OnClose, which the engine's timer
// goroutine may call: atomic.
type nbioConn struct {
	due atomic.Int64 // the read deadline, Unix ns (Options.CloseDelay)
}

func startNbio(addr string, o Options) (Server, error) {
	logging.SetLevel(logging.LevelNone)
	s := &nbioServer{idle: o.Idle, delay: newCloseDelay(o)}
	s.eng = nbio.NewEngine(nbio.Config{Network: "tcp", Addrs: []string{addr}})
	s.eng.OnOpen(func(c *nbio.Conn) {
		s.opened()
		st := &nbioConn{}
		c.SetSession(st)
		s.touch(c, st)
	})
	s.eng.OnData(func(c *nbio.Conn, data []byte) {
		if st, ok := c.Session().(*nbioConn); ok {
			s.touch(c, st)
		}
		_, _ = c.Write(data) // copies what the socket does not take at once
	})
	s.eng.OnClose(func(c *nbio.Conn, err error) {
		idle := errors.Is(err, nbio.ErrReadTimeout)
		if st, ok := c.Session().(*nbioConn); ok && idle && s.delay != nil {
			s.delay.observe(time.Since(time.Unix(0, st.due.Load())))
		}
		s.closed(idle)
	})
	if err := s.eng.Start(); err != nil {
		return nil, fmt.Errorf("baseline: nbio: %w", err)
	}
	a, err := net.ResolveTCPAddr("tcp", s.eng.Addrs[0]) // the port picked, after Start
	if err != nil {
		s.eng.Stop()
		return nil, fmt.Errorf("baseline: nbio: %w", err)
	}
	s.addr = a
	return s, nil
}

// touch moves c's read deadline to now + idle, as a net.Conn server does
// before every Read.
func (s *nbioServer) touch(c *nbio.Conn, st *nbioConn) {
	if s.idle <= 0 {
		return
	}
	due := time.Now().Add(s.idle)
	if s.delay != nil {
		st.due.Store(due.UnixNano())
	}
	_ = c.SetReadDeadline(due)
}

func (s *nbioServer) Addr() net.Addr               { return s.addr }
func (s *nbioServer) Stats() Stats                 { return s.stats() }
func (s *nbioServer) MetricsHandler() http.Handler { return s.delay.MetricsHandler() }

// Shutdown stops the engine: its listener, pollers and connections.
func (s *nbioServer) Shutdown(ctx context.Context) error { return s.eng.Shutdown(ctx) }
