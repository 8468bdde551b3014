package wheel

import (
	"math"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// parker is where the driver waits for its next tick or for a wake-up.
//
// On Linux the driver sleeps in the futex system call rather than on a
// runtime timer. A runtime timer belongs to a P, and an event loop that waits
// in epoll_wait (as gnet's loops do) keeps its P while it waits; a timer on
// that P runs only when the runtime's monitor takes the P back, which takes
// up to two of its polls of up to 10 ms each. With every P held by a waiting
// loop, a 1 ms sleep then ends 10 ms late at the 99th percentile. A thread
// sleeping in futex is woken by the kernel on time and only needs a free P
// to continue (docs/design.md has the measurements).
//
// Ownership: state is shared (wake on any goroutine, sleep and take on the
// driver's) and accessed atomically and through futex; ts is the driver's.
type parker struct {
	state atomic.Uint32 // 1 while a wake-up is pending
	ts    syscall.Timespec
}

const (
	futexWaitPrivate = 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 129 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

func (p *parker) init() {}

// wake makes the driver's current or next sleep return. It never blocks;
// only the first wake after the driver took the previous one makes a
// system call.
func (p *parker) wake() {
	if p.state.Swap(1) == 0 {
		syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)), futexWakePrivate, 1, 0, 0, 0)
	}
}

// take reports whether a wake-up is pending, and consumes it.
func (p *parker) take() bool { return p.state.Swap(0) == 1 }

// sleep waits until now() reaches until (forever for math.MaxInt64) or wake
// is called, and reports whether it was woken. Early returns of the system
// call (signals, spurious wake-ups) are waited out.
func (p *parker) sleep(until int64, now func() int64) bool {
	for {
		if p.take() {
			return true
		}
		var ts *syscall.Timespec
		if until != math.MaxInt64 {
			d := until - now()
			if d <= 0 {
				return false
			}
			p.ts = syscall.NsecToTimespec(d)
			ts = &p.ts
		}
		// Returns at once (EAGAIN) if a wake came after take.
		syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)), futexWaitPrivate, 0, uintptr(unsafe.Pointer(ts)), 0, 0)
	}
}
