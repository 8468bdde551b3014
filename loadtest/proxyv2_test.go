package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRealServers_HAProxySendProxyV2 runs Debian's HAProxy with
// send-proxy-v2 in front of cmd/echo, which requires the PROXY protocol
// and trusts HAProxy's address alone. HAProxy connects to echo from
// 127.0.0.3, the clients from 127.0.0.1 and 127.0.0.2 (all loopback: the
// kernel routes 127/8 to lo). It checks that echo logs and limits by the
// client's address, not HAProxy's; that connections straight to echo are
// refused, with proxy_untrusted from an untrusted peer and proxy_missing
// from a trusted one without a header; and that the harness's idle
// judgement through HAProxy still holds.
func TestRealServers_HAProxySendProxyV2(t *testing.T) {
	haproxy := findBinary(t, "haproxy")
	const limit = realConns // per source: the idle run's connections just fit
	echoPort, metricsPort := freePort(t), freePort(t)
	echoAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(echoPort))
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort))
	logs := startEcho(t, "-addr", echoAddr, "-proxy-protocol", "required", "-trusted-proxies", "127.0.0.3",
		"-max-conns-per-source", strconv.Itoa(limit), "-metrics", metrics, "-log-level", "debug", "-log-format", "json")
	addr := startHAProxy(t, haproxy, echoAddr, "send-proxy-v2 source 127.0.0.3")

	// Limits: 127.0.0.1 fills its share through HAProxy; one more from it
	// is refused, while 127.0.0.2, through the same HAProxy, gets in.
	var held []net.Conn
	for range limit {
		c, ok := echoThrough(t, "127.0.0.1", addr)
		require.True(t, ok, "connection %d of 127.0.0.1, within its limit", len(held)+1)
		held = append(held, c)
	}
	_, ok := echoThrough(t, "127.0.0.1", addr)
	assert.False(t, ok, "one more from 127.0.0.1 is refused")
	other, ok := echoThrough(t, "127.0.0.2", addr)
	require.True(t, ok, "127.0.0.2 is another source: if echo counted HAProxy's address it would be refused")
	otherAddr := other.LocalAddr().String()
	require.NoError(t, other.Close())
	for _, c := range held {
		require.NoError(t, c.Close())
	}
	waitMetric(t, metrics, "netwheel_connections_open", 0)

	// Straight to echo: 127.0.0.1 is no trusted proxy; 127.0.0.3 is, but
	// sends no header.
	for _, from := range []string{"127.0.0.1", "127.0.0.3"} {
		c := dialFrom(t, from, echoAddr)
		_, _ = c.Write([]byte("hello\n"))
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, _ := io.Copy(io.Discard, c)
		assert.Zero(t, n, "echo answered a connection straight from %s", from)
		c.Close()
	}
	waitMetric(t, metrics, `netwheel_connections_closed_total{reason="proxy_untrusted"}`, 1)
	waitMetric(t, metrics, `netwheel_connections_closed_total{reason="proxy_missing"}`, 1)
	waitMetric(t, metrics, `netwheel_connections_closed_total{reason="source_limit"}`, 1)

	// Logs name the client, with HAProxy beside it as the peer.
	var seen map[string]any
	for _, l := range logs.lines() {
		if l["msg"] == "netserver: connection closed" && l["remote"] == otherAddr {
			seen = l
		}
	}
	require.NotNil(t, seen, "no close logged with remote=%s (the client through HAProxy)", otherAddr)
	assert.True(t, strings.HasPrefix(fmt.Sprint(seen["peer"]), "127.0.0.3:"), "the peer is HAProxy: %v", seen)

	// The idle judgement through HAProxy: HAProxy closes idle clients on
	// time, echo behind it counting them all as one source within its limit.
	res, out, err := runIdle(t, addr, "-tick", "2ms")
	require.NoError(t, err, "HAProxy closes on time: judged ok\n%s", out)
	s := res.Scenario("idle")
	require.NotNil(t, s, out)
	assert.Equal(t, realConns, s.Opened, out)
	assert.Equal(t, realConns, s.Closes.OnTime, "closed on time\n%s", out)
	assert.Empty(t, verdict(s), out)
	// Echo logged the harness's connections by the harness's address,
	// with HAProxy's beside it as the peer.
	byHarness := 0
	for _, l := range logs.lines() {
		if l["msg"] == "netserver: connection closed" && strings.HasPrefix(fmt.Sprint(l["remote"]), "127.0.0.1:") &&
			strings.HasPrefix(fmt.Sprint(l["peer"]), "127.0.0.3:") {
			byHarness++
		}
	}
	assert.GreaterOrEqual(t, byHarness, limit+realConns, "the held connections' and the idle run's closes, each logged by its client")
	t.Logf("per-source limit %d: %d held from 127.0.0.1, the next refused (source_limit=%v), 127.0.0.2 served; straight to echo: proxy_untrusted=%v proxy_missing=%v; idle through HAProxy: %d opened, %d reaped on time; %d closes logged with the client as remote and HAProxy as peer",
		limit, len(held), scrapeEcho(t, metrics)[`netwheel_connections_closed_total{reason="source_limit"}`],
		scrapeEcho(t, metrics)[`netwheel_connections_closed_total{reason="proxy_untrusted"}`],
		scrapeEcho(t, metrics)[`netwheel_connections_closed_total{reason="proxy_missing"}`], s.Opened, s.Closes.OnTime, byHarness)
}

// dialFrom connects to addr from the loopback address from.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// echoThrough connects to addr from from, sends a line and reports whether
// it came back (false: the connection was closed instead).
func echoThrough(t *testing.T, from, addr string) (net.Conn, bool) {
	t.Helper()
	c := dialFrom(t, from, addr)
	_, err := c.Write([]byte("x\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf := make([]byte, 2)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	return c, err == nil && string(buf) == "x\n"
}

// echoLogs keeps the JSON log lines of an echo process.
type echoLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *echoLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the log lines so far, decoded.
func (l *echoLogs) lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// startEcho builds cmd/echo and runs it with args; the test's cleanup
// stops it. Its output is kept, and returned.
func startEcho(t *testing.T, args ...string) *echoLogs {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "echo")
	build := exec.Command(goBin, "build", "-o", bin, "github.com/netwheel/netwheel/cmd/echo")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/echo: %s", out)
	logs := &echoLogs{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("echo said (last 4 KiB):\n%s", tail(logs.buf.String(), 4096))
			logs.mu.Unlock()
		}
	})
	return logs
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// scrapeEcho reads echo's metrics, by name with labels.
func scrapeEcho(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// waitMetric waits (at most 10 s) for echo's metric name to reach want.
func waitMetric(t *testing.T, addr, name string, want float64) {
	t.Helper()
	var got float64
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if got = scrapeEcho(t, addr)[name]; got == want {
			return
		}
	}
	t.Fatalf("echo's %s is %v, want %v", name, got, want)
}
