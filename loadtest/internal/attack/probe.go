package attack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/netwheel/netwheel/netserver/frame"
)

// ErrUnreachable is Probe's error when the server cannot be reached.
var ErrUnreachable = errors.New("loadtest: cannot reach the server")

// ProbeTimeout bounds Probe: its dial, and the wait for the answer to its message.
const ProbeTimeout = 3 * time.Second

// Probe opens one connection to addr, sends it payload over p (nothing
// if expect is AnswerNone) and waits for any byte back or the server's
// close, so that a server that refuses, is unreachable, or never accepts
// (its listener's backlog completes the handshake, but no byte ever comes
// back) fails the run within ProbeTimeout in one line, not with a report
// of every connection failing.
func Probe(ctx context.Context, addr string, p Proto, payload []byte, expect Expect) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, addr, err)
	}
	defer c.Close()
	hello := payload
	if p == Framed {
		hello = frame.AppendData(nil, 1, payload)
	} else if expect.Kind == AnswerNone {
		return nil // an open connection is all a probe can see
	}
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(hello); err != nil {
		return nil // closed at once (a refusal, say): the run reports it
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w at %s: it answered nothing within %s: it may not accept connections, or speak another protocol (say what it answers with -preset, or -payload and -expect; -expect none if it never answers)", ErrUnreachable, addr, ProbeTimeout)
	}
	return nil
}
