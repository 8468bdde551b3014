package attack

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/pacer"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// This file holds the churn scenario: connections opened at a rate, each
// sending one message.

// churn opens connections at ChurnRate for Duration; each sends one
// message, waits for its echo and closes. Latency runs from the scheduled
// open to the echo.
func (r *run) churn(ctx context.Context, rec *recorder) {
	if r.cfg.ChurnRate <= 0 {
		return
	}
	p, _ := pacer.New(time.Now(), 0, r.cfg.ChurnRate)
	total := p.Count(r.cfg.Duration)
	var wg sync.WaitGroup
	inflight := make(chan struct{}, 1024)
	r.mu.Lock()
	r.outcome.Elapsed[scenario.Churn] = r.cfg.Duration
	r.mu.Unlock()
	for n := range total {
		if d := time.Until(p.At(n)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
		}
		at := p.At(n)
		wg.Go(func() {
			defer func() { <-inflight }()
			res := report.ConnResult{Scenario: scenario.Churn, Role: scenario.Churn}
			cl, _ := r.open(ctx, &res, 0, netip.Addr{}, nil)
			if cl == nil {
				return
			}
			cl.replies(frame.ReplyAll)
			if _, ok := r.once(ctx, cl, &res); ok {
				rec.flush([]int64{int64(time.Since(at))})
			}
			cl.shut()
			res.End = cl.end
			res.Mismatch += cl.wrong.Load()
			r.emit(res)
		})
	}
	wg.Wait()
}

// writeErr names a failed send for ConnResult.Err: "going_away" when a
// framed server announced GOAWAY (it drains or the connection reached its
// max age: the client stops sending and waits for its echoes and the final
// CLOSE, as docs/protocol.md asks), "write" otherwise.
func writeErr(err error) string {
	if errors.Is(err, frame.ErrGoingAway) {
		return "going_away"
	}
	return "write"
}
