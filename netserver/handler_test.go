package netserver_test

import (
	"bufio"
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
)

// upper is a StreamHandler and nothing more: it has no OnMessage. It
// answers each line in upper case.
type upper struct{}

func (upper) OnOpen(*netserver.Conn)                    {}
func (upper) OnClose(*netserver.Conn, netserver.Reason) {}
func (upper) OnStream(c *netserver.Conn, in []byte) (consumed int) {
	for {
		i := bytes.IndexByte(in[consumed:], '\n')
		if i < 0 {
			return consumed
		}
		_ = c.Send(bytes.ToUpper(in[consumed : consumed+i+1]))
		consumed += i + 1
	}
}

// lifecycle has OnOpen and OnClose and no way to take input.
type lifecycle struct{}

func (lifecycle) OnOpen(*netserver.Conn)                    {}
func (lifecycle) OnClose(*netserver.Conn, netserver.Reason) {}

// New takes a Handler for either protocol and a StreamHandler for Raw, and
// refuses any other handler with an error that says what is missing.
func TestNew_HandlerKinds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protocol netserver.Protocol
		h        netserver.ConnHandler
		wantErr  string // "": accepted
	}{
		{name: "handler, raw", protocol: netserver.Raw, h: netserver.Echo{}},
		{name: "handler, framed", protocol: netserver.Framed, h: netserver.Echo{}},
		{name: "stream handler, raw", protocol: netserver.Raw, h: upper{}},
		{name: "stream handler, framed", protocol: netserver.Framed, h: upper{}, wantErr: "must implement OnMessage"},
		{name: "neither, raw", protocol: netserver.Raw, h: lifecycle{}, wantErr: "neither a Handler (OnMessage) nor a StreamHandler (OnStream)"},
		{name: "nil", protocol: netserver.Raw, h: nil, wantErr: "nil handler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := netserver.New(netserver.Config{Addr: "127.0.0.1:0", Protocol: tc.protocol}, tc.h)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, netserver.ErrConfig)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// A StreamHandler without OnMessage serves a Raw connection: OnStream gets
// the bytes, and a line cut between writes comes whole.
func TestRaw_StreamHandlerAlone(t *testing.T) {
	s := start(t, netserver.Config{}, upper{})
	c := dial(t, s)
	c.Push([]byte("one\ntw"))
	c.Push([]byte("o\n"))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	r := bufio.NewReader(c)
	for _, want := range []string{"ONE\n", "TWO\n"} {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, want, line)
	}
}

// closeWatcher hands over each connection as it opens and its reason as
// it closes; a "quit" message closes it from the handler.
type closeWatcher struct {
	opened chan *netserver.Conn
	closed chan netserver.Reason
}

func (w *closeWatcher) OnOpen(c *netserver.Conn) { w.opened <- c }
func (*closeWatcher) OnMessage(c *netserver.Conn, msg []byte) {
	if bytes.HasPrefix(msg, []byte("quit")) {
		_ = c.Close()
	}
}
func (w *closeWatcher) OnClose(_ *netserver.Conn, r netserver.Reason) { w.closed <- r }

// Once a connection has closed, whoever closed it, SendAsync and CloseAsync
// return ErrClosed while the server runs on.
func TestConn_AsyncAfterClose(t *testing.T) {
	for _, tc := range []struct {
		name       string
		closeIt    func(t *testing.T, client *testpeer.Peer, conn *netserver.Conn)
		wantReason netserver.Reason
	}{
		{
			name:       "peer closed",
			closeIt:    func(t *testing.T, client *testpeer.Peer, _ *netserver.Conn) { require.NoError(t, client.Close()) },
			wantReason: netserver.ReasonPeerClosed,
		},
		{
			name:       "handler closed",
			closeIt:    func(_ *testing.T, client *testpeer.Peer, _ *netserver.Conn) { client.Push([]byte("quit")) },
			wantReason: netserver.ReasonServerClosed,
		},
		{
			name: "CloseAsync",
			closeIt: func(t *testing.T, _ *testpeer.Peer, conn *netserver.Conn) {
				require.NoError(t, conn.CloseAsync(netserver.ReasonApplication))
			},
			wantReason: netserver.ReasonApplication,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &closeWatcher{opened: make(chan *netserver.Conn, 1), closed: make(chan netserver.Reason, 1)}
			s := start(t, netserver.Config{}, w)
			client := dial(t, s)
			conn := <-w.opened
			require.NoError(t, conn.SendAsync([]byte("open\n")), "open: handed over")
			// Read it, so that the peer's close is a FIN, not a reset for
			// unread data.
			require.NoError(t, client.SetReadDeadline(time.Now().Add(5*time.Second)))
			line, err := bufio.NewReader(client).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "open\n", line)
			tc.closeIt(t, client, conn)
			select {
			case r := <-w.closed:
				require.Equal(t, tc.wantReason, r)
			case <-time.After(5 * time.Second):
				t.Fatal("the connection did not close")
			}
			assert.ErrorIs(t, conn.SendAsync([]byte("late\n")), netserver.ErrClosed)
			assert.ErrorIs(t, conn.CloseAsync(netserver.ReasonApplication), netserver.ErrClosed)
			assert.Equal(t, int64(1), s.Stats().Closed[tc.wantReason.String()], "closed once, with its first reason")
		})
	}
}
