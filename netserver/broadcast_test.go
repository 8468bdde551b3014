package netserver_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
)

// fanout is a Raw line protocol that sends every line a connection sends
// to every other connection, with SendAsync: from the sender's event loop
// to connections on any loop.
type fanout struct {
	opened chan *netserver.Conn
	mu     sync.Mutex
	conns  []*netserver.Conn
	errs   []error // what SendAsync returned, other than nil
}

func (f *fanout) OnOpen(c *netserver.Conn) {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	f.opened <- c
}

func (f *fanout) OnStream(c *netserver.Conn, in []byte) (consumed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		i := bytes.IndexByte(in[consumed:], '\n')
		if i < 0 {
			return consumed
		}
		line := in[consumed : consumed+i+1]
		consumed += i + 1
		for _, d := range f.conns {
			if d == c {
				continue
			}
			if err := d.SendAsync(line); err != nil {
				f.errs = append(f.errs, err)
			}
		}
	}
}

func (f *fanout) OnClose(c *netserver.Conn, _ netserver.Reason) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns = slices.DeleteFunc(f.conns, func(d *netserver.Conn) bool { return d == c })
}

// fanoutLine is the seq'th message of sender: its body, a function of
// both, lets the recipient check it arrived intact.
func fanoutLine(sender string, seq int) string {
	return fmt.Sprintf("%s %d %s\n", sender, seq, strings.Repeat(fmt.Sprintf("%s.%d;", sender, seq), seq%23+1))
}

// TestSendAsyncBroadcastAcrossLoops: messages handed with SendAsync from
// the event loop of one connection to connections on other loops, and
// from goroutines outside every loop, all arrive, intact and in order per
// sender, at every recipient.
func TestSendAsyncBroadcastAcrossLoops(t *testing.T) {
	const (
		loops     = 3
		clients   = 6
		perClient = 300 // lines each client sends, fanned out by the handler
		outsiders = 2   // goroutines outside the loops, each sending to every connection
		perOut    = 300 // messages each of them sends to each connection
	)
	h := &fanout{opened: make(chan *netserver.Conn, clients)}
	s := start(t, netserver.Config{EventLoops: loops}, h)
	cs := make([]*testpeer.Peer, clients)
	conns := make([]*netserver.Conn, 0, clients)
	onLoop := map[any]bool{}
	for i := range cs {
		cs[i] = dial(t, s)
		select {
		case c := <-h.opened:
			conns = append(conns, c)
			onLoop[c.Loop()] = true
		case <-time.After(5 * time.Second):
			t.Fatal("a connection did not open")
		}
	}
	require.GreaterOrEqual(t, len(onLoop), 2, "the connections must be spread over several event loops")
	// Each client knows its name by the order it was dialed; the handler's
	// conns are in the order they opened, the same.
	name := func(i int) string { return fmt.Sprintf("c%d", i) }

	var wg sync.WaitGroup
	problems := make(chan string, clients)
	for i, c := range cs {
		want := map[string]int{} // sender -> messages expected from it
		for j := range clients {
			if j != i {
				want[name(j)] = perClient
			}
		}
		for k := range outsiders {
			want[fmt.Sprintf("out%d", k)] = perOut
		}
		wg.Add(1)
		go func() { // the recipient: check every line, in order per sender
			defer wg.Done()
			got := map[string]int{}
			left := 0
			for _, n := range want {
				left += n
			}
			r := bufio.NewReader(c)
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			for left > 0 {
				line, err := r.ReadString('\n')
				if err != nil {
					problems <- fmt.Sprintf("%s: %v with %d messages to come (got %v)", name(i), err, left, got)
					return
				}
				sender, rest, _ := strings.Cut(line, " ")
				seqText, _, _ := strings.Cut(rest, " ")
				seq, err := strconv.Atoi(seqText)
				if err != nil || seq != got[sender]+1 || seq > want[sender] || line != fanoutLine(sender, seq) {
					problems <- fmt.Sprintf("%s: after message %d of %q, got %.60q", name(i), got[sender], sender, line)
					return
				}
				got[sender] = seq
				left--
			}
			problems <- ""
		}()
	}
	for i, c := range cs {
		wg.Add(1)
		go func() { // the sender: its lines, cut across writes
			defer wg.Done()
			var out []byte
			for seq := 1; seq <= perClient; seq++ {
				out = append(out, fanoutLine(name(i), seq)...)
			}
			for len(out) > 0 {
				n := min(len(out), 1000+i*100)
				if _, err := c.Write(out[:n]); err != nil {
					problems <- fmt.Sprintf("%s: write: %v", name(i), err)
					return
				}
				out = out[n:]
			}
		}()
	}
	sendErrs := make(chan error, outsiders)
	for k := range outsiders {
		go func() { // off every loop
			for seq := 1; seq <= perOut; seq++ {
				for _, c := range conns {
					if err := c.SendAsync([]byte(fanoutLine(fmt.Sprintf("out%d", k), seq))); err != nil {
						sendErrs <- err
						return
					}
				}
			}
			sendErrs <- nil
		}()
	}
	for range outsiders {
		assert.NoError(t, <-sendErrs)
	}
	for range clients {
		if p := <-problems; p != "" {
			t.Error(p)
		}
	}
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Empty(t, h.errs, "SendAsync from the loops")
	assert.Empty(t, s.Stats().Closed, "no connection closed")
}

// broadcast sends every message to every connection of the server (one event
// loop, so the handler may touch them all).
type broadcast struct{ conns map[*netserver.Conn]bool }

func (b *broadcast) OnOpen(c *netserver.Conn) { b.conns[c] = true }
func (b *broadcast) OnMessage(_ *netserver.Conn, msg []byte) {
	for c := range b.conns {
		_ = c.Send(msg)
	}
}
func (b *broadcast) OnClose(c *netserver.Conn, _ netserver.Reason) { delete(b.conns, c) }

// TestSendToOtherConnections: output a handler queues for several
// connections in one event reaches each of them, and only them.
func TestSendToOtherConnections(t *testing.T) {
	s := start(t, netserver.Config{EventLoops: 1}, &broadcast{conns: map[*netserver.Conn]bool{}})
	a, b := dial(t, s), dial(t, s)
	require.Eventually(t, func() bool { return s.Stats().Open == 2 }, waitFor, time.Millisecond)
	a.Push([]byte("hi"))
	for _, c := range []*testpeer.Peer{a, b} {
		got := make([]byte, 2)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		assert.Equal(t, "hi", string(got))
		require.NoError(t, c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
		n, _ := c.Read(got)
		assert.Zero(t, n, "nothing more for this connection")
	}
}
