package netserver_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/netserver"
)

// lines is a line protocol of its own on netserver: each request is a line,
// answered "OK <line>"; "QUIT" closes with an application code. The server
// probes a silent client with "PING" and a live one answers "PONG", which
// is a sign of life but not activity; a request must arrive whole within
// the request deadline; a client that sends no request is reaped as idle.
type lines struct {
	mu     sync.Mutex
	closed []netserver.Reason // the reasons connections closed with, in order
}

func (*lines) OnOpen(*netserver.Conn) {}

// OnStream takes every whole line and leaves a partial one buffered, with
// its request deadline running.
func (*lines) OnStream(c *netserver.Conn, in []byte) (consumed int) {
	for {
		i := bytes.IndexByte(in[consumed:], '\n')
		if i < 0 {
			if consumed < len(in) {
				c.RequestStart() // part of a request is here: its deadline runs
			}
			return consumed
		}
		line := string(in[consumed : consumed+i])
		consumed += i + 1
		c.RequestEnd()
		c.HandshakeDone()
		switch line {
		case "PONG": // alive, and no more
		case "QUIT":
			c.CloseCode(4000, "bye")
			return consumed
		default:
			c.Activity()
			_ = c.Send([]byte("OK " + line + "\n"))
		}
	}
}

func (*lines) OnProbe(c *netserver.Conn) { _ = c.Send([]byte("PING\n")) }

func (l *lines) OnClose(_ *netserver.Conn, r netserver.Reason) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = append(l.closed, r)
}

func (l *lines) reasons() []netserver.Reason {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]netserver.Reason(nil), l.closed...)
}

// linesConfig is the line server's configuration: every timeout of the
// protocol's own events, marked by the handler.
func linesConfig() netserver.Config {
	return netserver.Config{
		Addr:         "127.0.0.1:0",
		HandlerMarks: true,
		Timeouts: idle.Config{
			HandshakeTimeout: time.Second,            // a first request within a second
			FrameTimeout:     150 * time.Millisecond, // each request whole within 150 ms
			IdleTimeout:      800 * time.Millisecond, // a request at least every 800 ms
			KeepaliveTime:    300 * time.Millisecond, // PING after 300 ms of silence
			KeepaliveTimeout: 100 * time.Millisecond, // and wait 100 ms for any answer
		},
	}
}

func Example_lineProtocol() {
	h := &lines{}
	srv, err := netserver.New(linesConfig(), h)
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())

	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	c.Write([]byte("hello\nwor")) // a request and a half
	time.Sleep(20 * time.Millisecond)
	c.Write([]byte("ld\nQUIT\n")) // the rest, and goodbye
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			fmt.Println("client read:", err)
			break
		}
		fmt.Print(line)
	}
	// Output:
	// OK hello
	// OK world
	// client read: EOF
}

// The line protocol's timeouts, each marked by the handler, and the
// any-goroutine API.
func TestLineProtocol(t *testing.T) {
	type step struct {
		send  string        // written when the step starts
		after time.Duration // how long after the previous step
	}
	for _, tc := range []struct {
		name       string
		steps      []step
		answerPing bool // the client answers every PING with PONG
		want       netserver.Reason
		atLeast    time.Duration // the close comes at least this long after the last step
		atMost     time.Duration // and at most this long after it
	}{
		// A PONG would complete the half request, so this client does not
		// answer: the keepalive would close it 400 ms after its last byte.
		{name: "a request left half sent hits the request deadline", steps: []step{{send: "hel"}},
			want: netserver.ReasonFrameDeadline, atLeast: 150 * time.Millisecond, atMost: 400 * time.Millisecond},
		{name: "a silent client fails the keepalive", steps: []step{{send: "hi\n"}},
			want: netserver.ReasonKeepalive, atLeast: 400 * time.Millisecond, atMost: 700 * time.Millisecond},
		{name: "answering pings is not activity: the idle timeout reaps", steps: []step{{send: "hi\n"}}, answerPing: true,
			want: netserver.ReasonIdle, atLeast: 800 * time.Millisecond, atMost: 1100 * time.Millisecond},
		{name: "requests keep it open until it quits", answerPing: true,
			steps: []step{{send: "a\n"}, {send: "b\n", after: 400 * time.Millisecond}, {send: "c\n", after: 400 * time.Millisecond},
				{send: "QUIT\n", after: 400 * time.Millisecond}},
			want: netserver.ReasonApplication, atMost: 300 * time.Millisecond},
		{name: "more than MaxFrame left unconsumed", steps: []step{{send: strings.Repeat("x", 70<<10)}},
			want: netserver.ReasonTooLarge, atMost: 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &lines{}
			s := start(t, linesConfig(), h)
			c := dial(t, s)
			done := make(chan time.Time, 1)
			go func() { // the client's reader: answers pings, notes the close
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						done <- time.Now()
						return
					}
					if line == "PING\n" && tc.answerPing {
						_, _ = c.Write([]byte("PONG\n"))
					}
				}
			}()
			lag := lagmeter.New(t)
			var last time.Time
			for _, st := range tc.steps {
				time.Sleep(st.after) // the client's pace
				// Before the write: the server may act on it before
				// Write returns here.
				last = time.Now()
				c.Push([]byte(st.send))
			}
			var at time.Time
			select {
			case at = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the server never closed the connection")
			}
			require.Eventually(t, func() bool { return len(h.reasons()) == 1 }, waitFor, time.Millisecond)
			assert.Equal(t, tc.want, h.reasons()[0])
			assert.GreaterOrEqual(t, at.Sub(last), tc.atLeast)
			assert.Less(t, at.Sub(last), tc.atMost+2*lag.Stalled(), "late by more than the machine took")
		})
	}
}

// SendAsync and CloseAsync work from any goroutine, and after the
// connection or the server has gone they refuse.
func TestConn_AsyncFromOtherGoroutines(t *testing.T) {
	opened := make(chan *netserver.Conn, 1)
	h := &asyncHandler{opened: opened}
	s := start(t, netserver.Config{}, h)
	c := dial(t, s)
	var conn *netserver.Conn
	select {
	case conn = <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection opened")
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 25 {
				require.NoError(t, conn.SendAsync([]byte(fmt.Sprintf("%d.%d\n", i, j))))
			}
		}()
	}
	wg.Wait()
	r := bufio.NewReader(c)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	got := map[string]bool{}
	for range 100 {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		got[line] = true
	}
	assert.Len(t, got, 100, "every message, once")
	require.NoError(t, conn.CloseAsync(netserver.ReasonServerClosed))
	_, err := r.ReadString('\n')
	assert.Error(t, err, "closed")
	require.Eventually(t, func() bool { return s.Stats().Closed["server_closed"] == 1 }, waitFor, time.Millisecond)
	assert.ErrorIs(t, conn.SendAsync([]byte("late\n")), netserver.ErrClosed, "the connection has closed")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
	assert.ErrorIs(t, conn.SendAsync([]byte("later\n")), netserver.ErrClosed, "the server has stopped")
}

type asyncHandler struct{ opened chan<- *netserver.Conn }

func (a *asyncHandler) OnOpen(c *netserver.Conn)                { a.opened <- c }
func (*asyncHandler) OnMessage(*netserver.Conn, []byte)         {}
func (*asyncHandler) OnClose(*netserver.Conn, netserver.Reason) {}

// The bytes handed to SendAsync and not yet sent are bounded by the hard
// output limit: a producer faster than the loop (here, the loop is held)
// gets ErrOutputLimit, and the connection closes with output_limit.
func TestConn_SendAsyncBoundedByOutputLimit(t *testing.T) {
	h := &blockingHandler{opened: make(chan *netserver.Conn, 1), entered: make(chan struct{}), release: make(chan struct{})}
	s := start(t, netserver.Config{Limits: netserver.Limits{OutputHard: 64 << 10, OutputSoft: -1}}, h)
	c := dial(t, s)
	conn := <-h.opened
	c.Push([]byte("x"))
	<-h.entered // the connection's loop is held in OnMessage: nothing handed over runs
	msg := make([]byte, 16<<10)
	sent := 0
	var err error
	for range 8 {
		if err = conn.SendAsync(msg); err != nil {
			break
		}
		sent++
	}
	assert.ErrorIs(t, err, netserver.ErrOutputLimit)
	assert.Equal(t, 4, sent, "64 KiB handed over, the next 16 KiB refused")
	for range 10_000 { // a producer that retries while the loop is busy
		require.ErrorIs(t, conn.SendAsync(msg), netserver.ErrOutputLimit)
	}
	assert.LessOrEqual(t, conn.AsyncQueued(), sent+1, "the refusals hand over one close, not a task each")
	for range 10_000 {
		require.NoError(t, conn.CloseAsync(netserver.ReasonApplication))
	}
	assert.LessOrEqual(t, conn.AsyncQueued(), sent+2, "repeated CloseAsync calls hand over one close")
	close(h.release)
	require.Eventually(t, func() bool { return s.Stats().Closed["output_limit"] == 1 }, 5*time.Second, time.Millisecond)
}

type blockingHandler struct {
	opened           chan *netserver.Conn
	entered, release chan struct{}
}

func (b *blockingHandler) OnOpen(c *netserver.Conn) { b.opened <- c }
func (b *blockingHandler) OnMessage(*netserver.Conn, []byte) {
	close(b.entered)
	<-b.release
}
func (*blockingHandler) OnClose(*netserver.Conn, netserver.Reason) {}
