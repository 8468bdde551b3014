package wheel_test

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netwheel/netwheel/wheel"
)

// wakeArm is how long each BenchmarkWake_Lateness iteration arms its timer
// for, and wakeTraffic how often each blocker's event loop wakes up.
const (
	wakeArm     = time.Millisecond
	wakeTraffic = 2 * time.Millisecond
)

// BenchmarkWake_Lateness measures how late a 1 ms timer fires, for the wheel
// (default 1 ms tick; impl=wheel-syscall with WithSyscallSleep) and for the
// runtime's timers (impl=stdlib, a reused time.AfterFunc timer), with and
// without blockers: goroutines that, like
// gnet's event loops, wait in epoll_wait with no timeout. That system call
// keeps the goroutine's P until the runtime's monitor takes it back, so with
// blockers=gomaxprocs every P is held most of the time. Each blocker's epoll
// set holds a periodic timerfd that the kernel makes readable every
// wakeTraffic, standing for light network traffic: the loop keeps leaving
// and re-entering the system call, and its wake-ups depend on no Go timer.
// The loops yield the way gnet's do (see startBlockers); without that step
// runtime timers were not measurably late here.
//
// One op arms the timer, waits for its callback and records lateness: the
// callback's time.Now minus (time.Now at arming + 1 ms). Metrics are its
// p50, p99 and maximum in microseconds. The wheel is late by design by up to
// a tick (the deadline rounds up to it); only what goes beyond that is
// scheduling delay. Run it with a fixed count, e.g.
//
//	go test -run '^$' -bench Wake_Lateness -benchtime=500x -count=3 ./wheel/
func BenchmarkWake_Lateness(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, bl := range []struct {
		name string
		n    int
	}{
		{name: "0", n: 0},
		{name: "gomaxprocs", n: procs},
	} {
		for _, impl := range []string{"wheel", "wheel-syscall", "stdlib"} {
			b.Run("blockers="+bl.name+"/impl="+impl, func(b *testing.B) {
				benchWake(b, impl, bl.n)
			})
		}
	}
}

func benchWake(b *testing.B, impl string, blockers int) {
	fired := make(chan time.Time, 1)
	f := func() { fired <- time.Now() }
	var reset func()
	switch impl {
	case "wheel", "wheel-syscall":
		var opts []wheel.Option
		if impl == "wheel-syscall" {
			opts = append(opts, wheel.WithSyscallSleep())
		}
		w := wheel.New(opts...)
		defer w.Stop()
		t := new(wheel.Timer)
		t.Init(w, f)
		reset = func() { t.Reset(wakeArm) }
	case "stdlib":
		t := time.AfterFunc(time.Hour, f)
		t.Stop()
		reset = func() { t.Reset(wakeArm) }
	}
	stop := startBlockers(b, blockers)
	defer stop()

	late := make([]time.Duration, 0, 1024)
	for b.Loop() {
		armed := time.Now()
		reset()
		late = append(late, (<-fired).Sub(armed)-wakeArm)
	}
	b.StopTimer()
	slices.Sort(late)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(late[len(late)/2]), "p50-late-µs")
	b.ReportMetric(us(late[len(late)*99/100]), "p99-late-µs")
	b.ReportMetric(us(late[len(late)-1]), "max-late-µs")
}

// startBlockers starts n goroutines that each wait in epoll_wait on their own
// epoll set, which holds a timerfd firing every wakeTraffic. Each loops the
// way gnet v2's poller does: wait with no timeout; after handling events,
// poll once more with timeout 0, and when that finds nothing, yield with
// runtime.Gosched before waiting with no timeout again. The returned function
// stops them, waits for them and closes their descriptors.
func startBlockers(b *testing.B, n int) (stop func()) {
	b.Helper()
	var done atomic.Bool
	var wg sync.WaitGroup
	var fds []int
	stop = func() {
		done.Store(true) // each blocker sees it at its next wake-up
		wg.Wait()
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	period := unix.NsecToTimespec(int64(wakeTraffic))
	for i := range n {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			stop()
			b.Fatalf("epoll_create1: %v", err)
		}
		fds = append(fds, epfd)
		tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
		if err != nil {
			stop()
			b.Fatalf("timerfd_create: %v", err)
		}
		fds = append(fds, tfd)
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(tfd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, tfd, &ev); err != nil {
			stop()
			b.Fatalf("epoll_ctl: %v", err)
		}
		// Stagger the blockers' phases across one period.
		first := unix.NsecToTimespec(int64(wakeTraffic) * int64(i+1) / int64(n))
		spec := unix.ItimerSpec{Interval: period, Value: first}
		if err := unix.TimerfdSettime(tfd, 0, &spec, nil); err != nil {
			stop()
			b.Fatalf("timerfd_settime: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var evs [4]unix.EpollEvent
			var buf [8]byte
			msec := -1
			for !done.Load() {
				k, err := unix.EpollWait(epfd, evs[:], msec)
				switch {
				case k > 0:
					unix.Read(tfd, buf[:]) // consume the expirations
					msec = 0
				case err == nil || errors.Is(err, unix.EINTR):
					msec = -1
					runtime.Gosched()
				default:
					b.Errorf("blocker %d: epoll_wait: %v", i, err)
					return
				}
			}
		}()
	}
	return stop
}
