package netserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
)

// The flood test runs the server in a child process (this test binary, with
// floodChildEnv set) whose open-file limit is floodFiles, so that running
// out of descriptors hurts only the child.
const (
	floodChildEnv = "NETSERVER_FLOOD_CHILD"
	floodFiles    = 256
	floodLoops    = 2
	// floodMaxConns leaves what cmd/echo leaves: 64 descriptors and 3 per
	// event loop.
	floodMaxConns = floodFiles - 64 - 3*floodLoops
)

// floodChild serves raw echo under an open-file limit of floodFiles, with
// MaxConns floodMaxConns, or with MaxConns 0 (the default, which comes to
// the same bound) when floodChildEnv is "default"; it prints its address,
// and shuts down when its standard input closes. Its exit status says
// whether the server stopped by itself.
func floodChild() int {
	lim := syscall.Rlimit{Cur: floodFiles, Max: floodFiles}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 2
	}
	cfg := netserver.Config{Addr: "127.0.0.1:0", EventLoops: floodLoops, MaxConns: floodMaxConns}
	if os.Getenv(floodChildEnv) == "default" {
		cfg.MaxConns = 0
	}
	s, err := netserver.New(cfg, netserver.Echo{})
	if err == nil {
		err = s.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 2
	}
	fmt.Printf("ADDR %s\n", s.Addr())
	stdin := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdin)
	}()
	select {
	case <-s.Done():
		fmt.Fprintln(os.Stderr, "the server stopped by itself:", s.Err())
		return 3
	case <-stdin:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
		return 4
	}
	return 0
}

// echoOnce writes a byte and reads it back.
func echoOnce(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte{'x'}); err != nil {
		return err
	}
	b := make([]byte, 1)
	_, err := io.ReadFull(c, b)
	return err
}

// A flood of connections beyond MaxConns, on a server whose open-file
// limit leaves it the usual reserve, is refused one connection at a time:
// the server never runs out of descriptors (which would stop gnet's engine,
// and with it every connection) and goes on serving. So it is with the
// default MaxConns, which derives that bound from the open-file limit.
func TestConnFlood_DoesNotExhaustDescriptors(t *testing.T) {
	for _, mode := range []string{"explicit", "default"} {
		t.Run("max-conns="+mode, func(t *testing.T) { testConnFlood(t, mode) })
	}
}

func testConnFlood(t *testing.T, mode string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodChildEnv+"="+mode)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer // written by exec's copier, read in messages
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{}) // closed when the child has exited, with waitErr set
	var waitErr error
	defer func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "child: %s", stderr.String())
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	addr := strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))

	held := make([]net.Conn, 0, floodMaxConns)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range floodMaxConns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
		require.NoError(t, echoOnce(c), "connection %d of MaxConns", len(held))
	}

	// The flood: three times the open-file limit, 64 dials at a time, each
	// held until the server closes it.
	const flood = 3 * floodFiles
	var refused, served atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range flood {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				refused.Add(1)
				return
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != nil {
				refused.Add(1) // closed by the server (EOF or reset)
				return
			}
			served.Add(1)
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(flood), refused.Load(), "every connection beyond MaxConns was closed")
	select {
	case <-exited:
		t.Fatalf("the server's process ended during the flood (%v): %s", waitErr, stderr.String())
	default:
	}

	// The held connections are still served, and a freed place is taken.
	for i, c := range held[:10] {
		require.NoError(t, echoOnce(c), "held connection %d after the flood: %s", i, stderr.String())
	}
	held[0].Close()
	held = held[1:]
	var c net.Conn
	require.Eventually(t, func() bool {
		var err error
		if c, err = net.Dial("tcp", addr); err != nil {
			return false
		}
		if echoOnce(c) != nil {
			c.Close()
			return false
		}
		return true
	}, 5*time.Second, 20*time.Millisecond, "a freed place is not served: %s", stderr.String())
	c.Close()

	stdin.Close()
	select {
	case <-exited:
		require.NoError(t, waitErr, "child: %s", stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not shut down")
	}
}

// syncBuffer is a strings.Builder safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
