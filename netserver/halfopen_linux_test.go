package netserver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/internal/lagmeter"
	"github.com/netwheel/netwheel/internal/testpeer"
	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
	"github.com/netwheel/netwheel/retransmit"
)

// The half-open test: a peer vanishes without FIN or RST, and the server must
// find out by itself, through its keepalive probes or through retransmission
// giving up. The peer lives in a network namespace of the test's own, joined
// to the root namespace by a veth pair on a private /30; "vanishing" either
// sets the peer's link down or makes both ends drop every packet (netem does
// not work on every machine; a token bucket with a one-byte burst does).

// vanishing is how the peer disappears.
type vanishing int

const (
	linkDown  vanishing = iota // the namespace side of the veth pair goes down
	blackhole                  // both ends drop every packet they send
)

func (v vanishing) String() string {
	if v == linkDown {
		return "link_down"
	}
	return "blackhole"
}

// halfOpenSlack bounds how late the server may notice, past its configured
// deadline: two wheel ticks plus scheduling on a shared, noisy machine under
// -race.
const halfOpenSlack = 250 * time.Millisecond

func TestHalfOpen(t *testing.T) {
	const (
		kaTime    = 200 * time.Millisecond
		kaTimeout = 200 * time.Millisecond
		rto       = 100 * time.Millisecond
	)
	rtx := retransmit.Config{InitialRTO: rto, MinRTO: 20 * time.Millisecond, MaxRetransmits: 2}
	for _, tc := range []struct {
		name     string
		timeouts idle.Config
		// ackEcho makes the client acknowledge the server's echo before it
		// vanishes, so nothing is left to retransmit.
		ackEcho bool
		// deadline is when the server must give up, after the last byte it
		// received (keepalive) or the first transmission of its DATA
		// (retransmission).
		deadline    time.Duration
		wantReason  string
		wantProbes  int64
		wantRetrans int64
	}{
		{
			name:       "keepalive",
			timeouts:   idle.Config{KeepaliveTime: kaTime, KeepaliveTimeout: kaTimeout},
			ackEcho:    true,
			deadline:   kaTime + kaTimeout, // one probe (KeepaliveCount 0 means 1)
			wantReason: netserver.ReasonKeepalive.String(),
			wantProbes: 1,
		},
		{
			name:        "retransmit_give_up",
			ackEcho:     false,
			deadline:    rto + 2*rto + 4*rto, // RFC 6298 backoff: 100, 200, then 400ms for the last try
			wantReason:  netserver.ReasonGiveUp.String(),
			wantRetrans: 2,
		},
	} {
		for _, how := range []vanishing{linkDown, blackhole} {
			t.Run(tc.name+"/"+how.String(), func(t *testing.T) {
				ns := newNetns(t)
				closes := make(chan closeEvent, 4)
				cfg := netserver.Config{
					Addr:       netip.AddrPortFrom(ns.hostIP, 0).String(),
					Protocol:   netserver.Framed,
					Timeouts:   tc.timeouts,
					Retransmit: rtx,
				}
				s := start(t, cfg, closeRecorder{closes: closes})
				c := ns.dial(t, s.Addr().String())

				// Establish the connection and make the server know it: a
				// DATA, its ACK and echo.
				sentData := time.Now()
				c.Push(frame.AppendData(nil, 1, []byte("are you there")))
				var gotAck, gotEcho bool
				for !gotAck || !gotEcho {
					f, err := c.Next(waitFor)
					require.NoError(t, err)
					switch f.Type {
					case frame.TypeAck:
						require.Equal(t, uint64(1), f.Seq)
						gotAck = true
					case frame.TypeData:
						require.Equal(t, uint64(1), f.Seq)
						require.Equal(t, "are you there", string(f.Payload))
						gotEcho = true
					default:
						t.Fatalf("unexpected %v frame while establishing", f.Type)
					}
				}
				echoed := time.Now()
				// earliest and latest bound the instant the server's timer
				// started: its last inbound byte (keepalive) or the first
				// transmission of its DATA (retransmission).
				earliest, latest := sentData, echoed
				if tc.ackEcho {
					// The ACK then a PING: the PONG proves the server has
					// read the ACK (TCP keeps order), so nothing is in flight
					// when the peer vanishes.
					earliest = time.Now()
					c.Push(append(frame.AppendAck(nil, 1), frame.AppendPing(nil, 42)...))
					f, err := c.Next(waitFor)
					require.NoError(t, err)
					require.Equal(t, frame.Frame{Type: frame.TypePong, Nonce: 42}, f)
					latest = time.Now()
				}

				lag := lagmeter.New(t)
				ns.vanish(t, how)

				var ev closeEvent
				select {
				case ev = <-closes:
				case <-time.After(tc.deadline + 2*time.Second):
					t.Fatalf("the server did not notice the vanished peer within %v", tc.deadline+2*time.Second)
				}
				assert.Equal(t, tc.wantReason, ev.reason.String())
				assert.GreaterOrEqual(t, ev.at.Sub(earliest), tc.deadline-5*time.Millisecond, "closed before its deadline")
				assert.Less(t, ev.at.Sub(latest), tc.deadline+lag.Slack(halfOpenSlack), "closed too late")

				st := s.Stats()
				assert.Equal(t, map[string]int64{tc.wantReason: 1}, nonZero(st.Closed), "closed once, for that reason")
				assert.Zero(t, st.Open)
				assert.Equal(t, tc.wantProbes, st.Probes)
				assert.Equal(t, tc.wantRetrans, st.Retransmits)

				// The peer never learns: neither the server's CLOSE frame
				// nor its FIN reached it. Frames sent before the vanishing
				// took effect (a probe, a retransmission) may still arrive.
				for {
					f, err := c.Next(150 * time.Millisecond)
					if errors.Is(err, os.ErrDeadlineExceeded) {
						break
					}
					require.NoError(t, err, "the vanished peer heard the server close")
					require.NotEqual(t, frame.TypeClose, f.Type, "the vanished peer got the server's CLOSE")
				}
			})
		}
	}
}

type closeEvent struct {
	reason netserver.Reason
	at     time.Time
}

// closeRecorder echoes and reports each close, with when it happened.
type closeRecorder struct {
	netserver.Echo
	closes chan<- closeEvent
}

func (r closeRecorder) OnClose(_ *netserver.Conn, reason netserver.Reason) {
	select {
	case r.closes <- closeEvent{reason: reason, at: time.Now()}:
	default: // must not block the event loop; the test expects one close
	}
}

func nonZero(m map[string]int64) map[string]int64 {
	out := make(map[string]int64)
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// netns is a network namespace of the test's own, joined to the root
// namespace by a veth pair: hostIf/hostIP in the root namespace, peerIf/peerIP
// inside.
type netns struct {
	name           string
	hostIf, peerIf string
	hostIP, peerIP netip.Addr
}

// newNetns creates the namespace and the veth pair, addressed and up, and
// removes them when the test ends, whatever happens. It skips the test only
// when the process lacks the privilege to do so.
func newNetns(t *testing.T) *netns {
	t.Helper()
	requireNetAdmin(t)
	var rnd [6]byte
	_, err := rand.Read(rnd[:])
	require.NoError(t, err)
	sfx := hex.EncodeToString(rnd[:4])
	// A random /30 in 10.253.0.0/16: 10.253.X.4k+1 (host) and +2 (peer).
	base := netip.AddrFrom4([4]byte{10, 253, rnd[4], rnd[5] &^ 3})
	ns := &netns{
		name:   "nwtest-" + sfx,
		hostIf: "nwh" + sfx,
		peerIf: "nwp" + sfx,
		hostIP: base.Next(),
		peerIP: base.Next().Next(),
	}

	if out, err := command("ip", "netns", "add", ns.name); err != nil {
		if isPermission(out) {
			t.Skipf("half-open test skipped: cannot create a network namespace (no privilege): %v: %s", err, out)
		}
		t.Fatalf("ip netns add %s: %v: %s", ns.name, err, out)
	}
	t.Cleanup(func() {
		if out, err := command("ip", "netns", "del", ns.name); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns.name, err, out)
		}
	})
	run(t, "ip", "link", "add", ns.hostIf, "type", "veth", "peer", "name", ns.peerIf)
	// Deleting the namespace would delete the pair too, but only once
	// nothing holds the namespace any more (sockets do): delete it by hand.
	// Registered after the namespace's cleanup, so it runs before it.
	t.Cleanup(func() {
		if out, err := command("ip", "link", "del", ns.hostIf); err != nil {
			t.Errorf("ip link del %s: %v: %s", ns.hostIf, err, out)
		}
	})
	run(t, "ip", "link", "set", "dev", ns.peerIf, "netns", ns.name)
	run(t, "ip", "addr", "add", ns.hostIP.String()+"/30", "dev", ns.hostIf)
	run(t, "ip", "-n", ns.name, "addr", "add", ns.peerIP.String()+"/30", "dev", ns.peerIf)
	run(t, "ip", "link", "set", "dev", ns.hostIf, "up")
	run(t, "ip", "-n", ns.name, "link", "set", "dev", ns.peerIf, "up")
	return ns
}

// dial connects to addr from inside the namespace, and closes the connection
// (with a reset, so the namespace is not kept alive by an orphan socket) when
// the test ends.
func (ns *netns) dial(t *testing.T, addr string) *testpeer.Peer {
	t.Helper()
	type result struct {
		c        net.Conn
		err      error
		noPrivTo string // set when setns was refused
	}
	start := time.Now() // before the dial, as in dial
	done := make(chan result, 1)
	// A socket belongs to the namespace of the thread that creates it, for
	// good: create and connect it on a locked thread moved into the
	// namespace, then move the thread back. If it cannot move back, the
	// goroutine exits still locked and the runtime discards the thread.
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open own namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/var/run/netns/"+ns.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open namespace %s: %w", ns.name, err)}
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			r := result{err: fmt.Errorf("setns into %s: %w", ns.name, err)}
			if errors.Is(err, unix.EPERM) {
				r.noPrivTo = ns.name
			}
			done <- r
			return
		}
		d := net.Dialer{Timeout: 3 * time.Second}
		c, dialErr := d.Dial("tcp", addr)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			if c != nil {
				c.Close()
			}
			done <- result{err: fmt.Errorf("setns back to the original namespace (thread discarded): %w", err)}
			return // still locked: the runtime ends the thread with the goroutine
		}
		runtime.UnlockOSThread()
		done <- result{c: c, err: dialErr}
	}()
	r := <-done
	if r.noPrivTo != "" {
		t.Skipf("half-open test skipped: cannot enter network namespace %s (no privilege): %v", r.noPrivTo, r.err)
	}
	require.NoError(t, r.err)
	t.Cleanup(func() {
		if tc, ok := r.c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		r.c.Close()
	})
	require.Equal(t, ns.peerIP.String(), r.c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap().String(),
		"the client's socket lives in the namespace")
	return testpeer.New(t, r.c, start, 0)
}

// vanish makes the peer disappear without a FIN or RST.
func (ns *netns) vanish(t *testing.T, how vanishing) {
	t.Helper()
	switch how {
	case linkDown:
		run(t, "ip", "-n", ns.name, "link", "set", "dev", ns.peerIf, "down")
	case blackhole:
		// A one-byte bucket refilled at 8 bit/s admits no packet: every
		// packet either end sends is dropped.
		drop := []string{"root", "tbf", "rate", "8bit", "burst", "1", "limit", "1"}
		run(t, append([]string{"tc", "qdisc", "add", "dev", ns.hostIf}, drop...)...)
		run(t, append([]string{"tc", "-n", ns.name, "qdisc", "add", "dev", ns.peerIf}, drop...)...)
	}
}

// requireNetAdmin skips the test unless the process has CAP_NET_ADMIN and
// CAP_SYS_ADMIN (to create namespaces and mount them under /var/run/netns).
func requireNetAdmin(t *testing.T) {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		hexCaps, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hexCaps), 16, 64)
		require.NoError(t, err, "CapEff in /proc/self/status")
		var missing []string
		if caps&(1<<unix.CAP_NET_ADMIN) == 0 {
			missing = append(missing, "CAP_NET_ADMIN")
		}
		if caps&(1<<unix.CAP_SYS_ADMIN) == 0 {
			missing = append(missing, "CAP_SYS_ADMIN")
		}
		if len(missing) > 0 {
			t.Skipf("half-open test skipped: it creates a network namespace and a veth pair, which needs %s", strings.Join(missing, " and "))
		}
		return
	}
	t.Fatal("no CapEff line in /proc/self/status")
}

func isPermission(out string) bool {
	return strings.Contains(out, "Operation not permitted") || strings.Contains(out, "Permission denied")
}

// command runs a tool, bounded in time, and returns its combined output.
func command(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// run runs a tool and fails the test if it fails.
func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := command(args...)
	require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
}
