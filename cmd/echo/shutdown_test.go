package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver/frame"
)

// child is the echo command run as a process of its own (asEchoEnv), with
// a JSON log on stderr that it keeps whole.
type child struct {
	cmd     *exec.Cmd
	started map[string]any // the startup line
	exited  chan struct{}  // closed once the process has been waited for
	status  int            // its exit status, once exited is closed
	mu      sync.Mutex
	lines   []map[string]any // under mu
}

// startChild runs echo with args plus a JSON log, and returns once it
// serves. The child does not outlive the test.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], append(args, "-log-format", "json")...)
	cmd.Env = append(os.Environ(), asEchoEnv+"=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, exited: make(chan struct{})}
	serving := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"msg": sc.Text()} // not JSON: keep it for the failure message
			}
			c.mu.Lock()
			c.lines = append(c.lines, m)
			c.mu.Unlock()
			if m["msg"] == "echo: serving" {
				serving <- m
			}
		}
		err := cmd.Wait() // after the last read of stderr, as Wait requires
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			c.status = ee.ExitCode()
		default:
			c.status = -1
		}
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
	})
	select {
	case c.started = <-serving:
	case <-c.exited:
		t.Fatalf("echo exited before serving:\n%s", c.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("no startup line:\n%s", c.log())
	}
	return c
}

// log returns the lines logged so far, one a line.
func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, m := range c.lines {
		j, _ := json.Marshal(m)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// linesOf returns the lines logged with message msg.
func (c *child) linesOf(msg string) []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found []map[string]any
	for _, m := range c.lines {
		if m["msg"] == msg {
			found = append(found, m)
		}
	}
	return found
}

// TestMain_ShutdownTellsAndCounts runs echo as a process, as users do, with
// framed peers, and sends it SIGTERM. Peers that answer GOAWAY and have
// nothing in flight are closed at once with CLOSE code 2 and echo exits 0;
// peers that never acknowledge their echo are cut at -shutdown-timeout,
// never before, and each of them still gets CLOSE code 2 and is counted and
// logged before echo exits, with status 1.
func TestMain_ShutdownTellsAndCounts(t *testing.T) {
	const conns = 40
	tests := []struct {
		name       string
		replies    frame.Reply   // the peers' own answers
		grace      time.Duration // -shutdown-timeout
		wantStatus int
		wantCut    int
	}{
		{name: "drained", replies: frame.ReplyAll, grace: 5 * time.Second, wantStatus: 0, wantCut: 0},
		{name: "cut", replies: frame.ReplyPong, grace: 500 * time.Millisecond, wantStatus: 1, wantCut: conns},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := startChild(t, "-proto", "framed", "-addr", "127.0.0.1:0", "-shutdown-timeout", tc.grace.String())
			addr, _ := c.started["addr"].(string)
			peers := make([]*frame.Conn, conns)
			for i := range peers {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				fc, err := frame.Dial(ctx, addr)
				cancel()
				require.NoError(t, err)
				defer fc.NetConn().Close()
				require.NoError(t, fc.NetConn().SetDeadline(time.Now().Add(20*time.Second)))
				fc.SetReplies(tc.replies)
				_, err = fc.Send([]byte("in flight"))
				require.NoError(t, err)
				p, err := fc.Recv()
				require.NoError(t, err)
				require.Equal(t, "in flight", string(p))
				peers[i] = fc
			}
			if tc.replies&frame.ReplyAck != 0 {
				for _, fc := range peers { // nothing in flight when the drain starts
					require.Eventually(t, func() bool { return fc.Acked() == 1 }, 10*time.Second, time.Millisecond)
				}
			}

			// What each peer receives until the server closes: its CLOSE code.
			codes := make(chan frame.Code, conns)
			for _, fc := range peers {
				go func() {
					var code frame.Code
					for {
						_, err := fc.Recv()
						var ce *frame.CloseError
						if errors.As(err, &ce) {
							code = ce.Code
						}
						if err != nil && !errors.As(err, &ce) {
							codes <- code
							return
						}
					}
				}()
			}
			sent := time.Now()
			require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
			select {
			case <-c.exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("echo did not exit after SIGTERM:\n%s", c.log())
			}
			took := time.Since(sent)
			assert.Equal(t, tc.wantStatus, c.status, "exit status; log:\n%s", c.log())
			for range peers {
				select {
				case code := <-codes:
					assert.Equal(t, frame.CodeShutdown, code, "every peer gets CLOSE code 2 before the end")
				case <-time.After(10 * time.Second):
					t.Fatal("a peer's connection outlived echo")
				}
			}
			for _, fc := range peers {
				away, ok := fc.GoingAway()
				if assert.True(t, ok, "told GOAWAY first") {
					assert.Equal(t, frame.CodeShutdown, away.Code)
					assert.LessOrEqual(t, away.Grace, tc.grace)
				}
			}
			var cutLogged int
			for _, m := range c.linesOf("netserver: connection closed") {
				if m["cut"] == true {
					cutLogged++
					assert.Equal(t, "shutdown", m["reason"])
				}
			}
			assert.Equal(t, tc.wantCut, cutLogged, "cut connections logged")
			drained := c.linesOf("echo: drained")
			require.Len(t, drained, 1, "log:\n%s", c.log())
			assert.EqualValues(t, tc.wantCut, drained[0]["cut"])
			assert.EqualValues(t, conns, drained[0]["closed_shutdown"], "every close counted")
			assert.EqualValues(t, 0, drained[0]["open"])
			if tc.wantCut > 0 {
				assert.GreaterOrEqual(t, took, tc.grace, "cut before -shutdown-timeout")
			} else {
				assert.Less(t, took, tc.grace, "finished peers wait for no deadline")
			}
		})
	}
}
