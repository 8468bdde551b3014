package netserver_test

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/netserver"
	"github.com/netwheel/netwheel/netserver/frame"
)

// benchWindow is how many messages a benchmark sends before it waits for
// the client to have read them all: it bounds the bytes handed over and
// not yet sent (32 * 4096, far below Limits.OutputHard).
const benchWindow = 32

// sink is a Raw handler for BenchmarkConn_SendAsync: it hands out its
// connection and, for every byte it receives, Sends msg benchWindow times
// on the event loop, timing those calls.
type sink struct {
	opened    chan *netserver.Conn
	msg       []byte
	sendNanos atomic.Int64 // time spent in the loop's Send calls
}

func (s *sink) OnOpen(c *netserver.Conn) { s.opened <- c }
func (s *sink) OnMessage(c *netserver.Conn, in []byte) {
	for range in {
		t0 := time.Now()
		for range benchWindow {
			_ = c.Send(s.msg)
		}
		s.sendNanos.Add(int64(time.Since(t0)))
	}
}
func (*sink) OnClose(*netserver.Conn, netserver.Reason) {}

// BenchmarkConn_SendAsync measures SendAsync from a goroutine outside the
// event loop to a live connection on loopback whose client reads
// everything, against Send called on the loop (path=loop, batched in one
// event as a handler would). ns/op is the sustained cost per message,
// the client's read included, sending benchWindow messages and waiting for
// the client to have them; call-ns/op is the time the sender spends in the
// call itself (SendAsync on the benchmark's goroutine; Send on the loop).
// allocs/op counts the whole process: caller, loop and client.
// proto=framed sends DATA frames on the loop: each trigger is a DATA frame
// that also acknowledges everything the client has, so call-ns/op is the
// cost of a Framed Send and ns/op includes the ACKs' processing.
func BenchmarkConn_SendAsync(b *testing.B) {
	for _, path := range []string{"async", "loop", "loop/proto=framed"} {
		for _, size := range []int{64, 4096} {
			b.Run(fmt.Sprintf("path=%s/bytes=%d", path, size), func(b *testing.B) {
				h := &sink{opened: make(chan *netserver.Conn, 1), msg: make([]byte, size)}
				framed := path == "loop/proto=framed"
				cfg, msgBytes, windowBytes := netserver.Config{}, size, 0
				if framed {
					cfg.Protocol = netserver.Framed
					msgBytes, windowBytes = frame.DataHeaderSize+size, len(frame.AppendAck(nil, 0))
				}
				s := start(b, cfg, h)
				cl, err := net.Dial("tcp", s.Addr().String())
				require.NoError(b, err)
				var conn *netserver.Conn
				select {
				case conn = <-h.opened:
				case <-time.After(5 * time.Second):
					b.Fatal("no connection opened")
				}
				var recv atomic.Int64
				more := make(chan struct{}, 1)
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { // the client: reads everything, says when more came
					defer wg.Done()
					buf := make([]byte, 256<<10)
					for {
						n, err := cl.Read(buf)
						recv.Add(int64(n))
						select {
						case more <- struct{}{}:
						default:
						}
						if err != nil {
							return
						}
					}
				}()
				b.Cleanup(func() {
					cl.Close()
					wg.Wait()
				})
				wait := func(sent int) {
					want := int64(sent*msgBytes + sent/benchWindow*windowBytes)
					for recv.Load() < want {
						select {
						case <-more:
						case <-time.After(5 * time.Second):
							b.Fatalf("the client got %d bytes of %d", recv.Load(), want)
						}
					}
				}
				var callNanos time.Duration
				var windowStart time.Time
				sent := 0
				trigger := []byte{'g'}
				b.ReportAllocs()
				for b.Loop() {
					sent++
					if path == "async" {
						if sent%benchWindow == 1 {
							windowStart = time.Now()
						}
						if err := conn.SendAsync(h.msg); err != nil {
							b.Fatal(err)
						}
						if sent%benchWindow == 0 {
							callNanos += time.Since(windowStart)
							wait(sent)
						}
						continue
					}
					if sent%benchWindow == 0 {
						if framed {
							trigger = frame.AppendData(frame.AppendAck(trigger[:0], uint64(sent-benchWindow)), uint64(sent/benchWindow), []byte{'g'})
						}
						if _, err := cl.Write(trigger); err != nil {
							b.Fatal(err)
						}
						wait(sent)
					}
				}
				if path != "async" {
					callNanos = time.Duration(h.sendNanos.Load())
				}
				if windows := sent / benchWindow; windows > 0 {
					b.ReportMetric(float64(callNanos)/float64(windows*benchWindow), "call-ns/op")
				}
			})
		}
	}
}
