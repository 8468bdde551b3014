package attack

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/netwheel/netwheel/loadtest/internal/fincap"
	"github.com/netwheel/netwheel/loadtest/internal/report"
	"github.com/netwheel/netwheel/loadtest/internal/scenario"
	"github.com/netwheel/netwheel/netserver/frame"
)

// This file holds one connection's life: its dial, its role, and the
// result it emits.

// dialAs opens a connection; rcvBuf > 0 asks for that receive buffer
// before connecting (where the system allows), so that the window the
// server sees is small from the start. With Config.Proxy, the connection's
// PROXY header names client (the zero Addr: the next of Proxy's clients),
// written before anything else as part of the dial. It returns the start
// of the dial (the server cannot have accepted the connection before it)
// and the dial time.
func (r *run) dialAs(ctx context.Context, rcvBuf int, client netip.Addr) (net.Conn, time.Time, time.Duration, error) {
	select {
	case r.dialSem <- struct{}{}:
	case <-ctx.Done():
		return nil, time.Time{}, 0, ctx.Err()
	}
	defer func() { <-r.dialSem }()
	d := net.Dialer{Timeout: DialTimeout}
	if rcvBuf > 0 {
		d.Control = rcvBufControl(rcvBuf)
	}
	if len(r.cfg.Sources) > 0 {
		ip := r.cfg.Sources[r.srcNext.Add(1)%uint64(len(r.cfg.Sources))]
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	t0 := time.Now()
	c, err := d.DialContext(ctx, "tcp", r.cfg.Addr)
	if err == nil && r.cfg.Proxy.Version != 0 {
		if !client.IsValid() {
			client = r.cfg.Proxy.Client(r.clientNext.Add(1) - 1)
		}
		if _, err = c.Write(r.cfg.Proxy.header(c, client)); err != nil {
			c.Close()
		}
	}
	if err != nil {
		r.ctr.DialErrors.Add(1)
		return nil, t0, 0, err
	}
	r.ctr.Dialed.Add(1)
	r.ctr.opened()
	return c, t0, time.Since(t0), nil
}

// open dials a connection for res (dialAs), stamps res.OpenedAt and
// res.Connect, and calls arrived (nil: none) once the dial has ended,
// either way. A failed dial's result is emitted at once and open returns
// a nil client. It returns the start of the dial too.
func (r *run) open(ctx context.Context, res *report.ConnResult, rcvBuf int, src netip.Addr, arrived func()) (*client, time.Time) {
	c, dialed, dt, err := r.dialAs(ctx, rcvBuf, src)
	res.OpenedAt = time.Now()
	if arrived != nil {
		arrived()
	}
	if err != nil {
		res.DialErr = DialErrKind(err)
		r.emit(*res)
		return nil, dialed
	}
	res.Connect = dt
	return r.client(c), dialed
}

// conn runs one connection of a scenario in the given role and emits its
// result.
func (r *run) conn(ctx context.Context, name, role string, i, n int, rec *recorder) {
	spec := scenario.Lookup(name)
	res := report.ConnResult{Scenario: name, Role: role}
	rcvBuf := 0
	if role == scenario.Nonreader || role == scenario.RoleNotReading {
		rcvBuf = nonreaderRcvBuf
	}
	if testDialDelay != nil {
		time.Sleep(testDialDelay(name, i))
	}
	var arrived func()
	if spec.Quiet(i) {
		arrived = r.quiet.arrive
	}
	cl, dialed := r.open(ctx, &res, rcvBuf, netip.Addr{}, arrived)
	if cl == nil {
		return
	}
	// Whatever every connection sends before its role goes here (the
	// PROXY header is part of the dial, dialAs, so that connflood's and
	// churn's connections send it too); a new role is a case below and a
	// row of scenario.All.
	switch role {
	case scenario.Echo:
		r.echo(ctx, cl, i, n, rec, &res)
	case scenario.Idle:
		r.idle(ctx, cl, i, &res)
	case scenario.Handshake:
		r.handshake(ctx, cl, dialed, &res)
	case scenario.RoleSurvivor:
		r.survivor(ctx, cl, &res)
	case scenario.RoleSilent:
		r.silent(ctx, cl, i, &res)
	case scenario.Retransmit:
		r.retransmit(ctx, cl, &res)
	case scenario.Slowloris:
		r.slowloris(ctx, cl, &res)
	case scenario.Nonreader:
		r.nonreader(ctx, cl, &res)
	case scenario.Splitter:
		r.splitter(ctx, cl, i, n, rec, &res)
	case scenario.RoleReading, scenario.RoleNotReading:
		r.pingflood(ctx, cl, role, &res)
	case scenario.GarbageRandom, scenario.GarbageBadType, scenario.GarbageHugeLength:
		r.garbage(ctx, cl, role, &res)
	}
	cl.shut()
	if res.End == "" { // hostile roles set it themselves
		res.End = cl.end
	}
	res.Pings = int(cl.pings.Load())
	if spec.Expects(role) && cl.closedByServer() {
		res.Refusal = cl.refusal(res.Expect != "")
	}
	if res.Refusal == "" {
		res.Mismatch += cl.wrong.Load()
	} else { // a refusal's words are no wrong answers, and its message was not lost
		res.Lost = 0
		if res.Err == "no_echo" {
			res.Err = ""
		}
	}
	if cl.closedByServer() && res.Expect != "" && res.Refusal == "" {
		res.ClosedAt = cl.endAt
		// A close by FIN (a reset has none): it passed the kernel before
		// the client read it; the wait is for the capture's goroutine to
		// have read it too.
		if a, ok := cl.c.LocalAddr().(*net.TCPAddr); ok && r.cfg.FINs != nil && (res.End == "eof" || res.End == res.Expect) {
			if ip := a.IP.To4(); ip != nil {
				res.WireFinAt, _ = r.cfg.FINs.Take(fincap.Client{IP: [4]byte(ip), Port: uint16(a.Port)}, res.OpenedAt, 200*time.Millisecond)
			}
		}
	}
	r.emit(res)
}

// client returns a client over c speaking the run's protocol.
func (r *run) client(c net.Conn) *client {
	cl := newClient(c, r.cfg.Proto, r.ctr)
	cl.size, cl.expect, cl.prefix = len(r.payload), r.cfg.Expect.Kind, r.cfg.Expect.Prefix
	return cl
}

// message appends message seq (1-based) in the client's protocol, for
// the writes that bypass the frame.Conn (nonreader's flood).
func (r *run) message(dst []byte, seq uint64) []byte {
	if r.cfg.Proto == Framed {
		return frame.AppendData(dst, seq, r.payload)
	}
	return append(dst, r.payload...)
}

// wait sleeps until t, or until ctx ends or the server closes the connection;
// it reports whether t was reached.
func wait(ctx context.Context, cl *client, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		case <-cl.done:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	case <-cl.done:
		return false
	}
}
