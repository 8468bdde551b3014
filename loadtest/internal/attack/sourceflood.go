package attack

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// sourceflood runs the sourceflood scenario, alone, after the others: the
// flooding source (Proxy.FloodSource) opens Conns[scenario.Sourceflood]
// connections at once and holds them, answering pings, as connflood does;
// once they are dialed, Neighbours connections, each from a source of its
// own, open, send a message and wait for its answer. The flood and the
// neighbours are held until every neighbour has been answered or has
// given up, and FloodHold after, then closed: the judge counts how many
// of the flooder's the server held (at most its per-source limit) and
// whether every neighbour got in, was answered and stayed. While held,
// every connection sends a message every third of the server's idle
// timeout (holdUntil), so that slow dials cannot make the hold an idle
// connection's.
func (r *run) sourceflood(ctx context.Context) {
	n, m := r.cfg.Conns[scenario.Sourceflood], r.cfg.Neighbours
	if n <= 0 {
		return
	}
	end := make(chan struct{}) // closed when the flood and the neighbours are let go
	var wg, answered sync.WaitGroup
	dialed := r.holdConns(ctx, &wg, scenario.Sourceflood, scenario.RoleFlooder, n, r.cfg.Proxy.FloodSource(), true, func(_ *barrier, cl *client) {
		r.holdUntil(ctx, cl, end)
	})
	select {
	case <-dialed.released:
	case <-ctx.Done():
	}
	answered.Add(m)
	for range m {
		wg.Go(func() {
			res := report.ConnResult{Scenario: scenario.Sourceflood, Role: scenario.RoleNeighbour}
			cl, _ := r.open(ctx, &res, 0, netip.Addr{}, nil)
			if cl == nil {
				answered.Done()
				return
			}
			cl.replies(frame.ReplyAll)   // a neighbour answers pings: it must stay
			_, _ = r.once(ctx, cl, &res) // starts the reader
			answered.Done()
			r.holdUntil(ctx, cl, end)
			r.hostileEnd(cl, true, 0, &res)
			r.emit(res)
		})
	}
	answered.Wait()
	tm := time.NewTimer(r.cfg.FloodHold)
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
	tm.Stop()
	close(end)
	wg.Wait()
}

// holdUntil keeps cl open until end, sending a message every third of the
// server's idle timeout (at most keepAliveMax; none if it is not known),
// so that a hold, however long the dials and answers before its end take,
// is not an idle connection's. It returns early if cl or ctx ends.
func (r *run) holdUntil(ctx context.Context, cl *client, end <-chan struct{}) {
	var keep <-chan time.Time
	if every := min(r.cfg.Timeouts.Idle/3, keepAliveMax); every > 0 {
		tk := time.NewTicker(every)
		defer tk.Stop()
		keep = tk.C
	}
	keepUntil(ctx, cl, end, keep, func() error {
		_, err := cl.send(r.payload, 1)
		if err == nil {
			r.ctr.Sent.Add(1)
		}
		return err
	})
}
