package wheel

import (
	"math"
	"syscall"
	"unsafe"
)

const haveFutex = true

// parkOS holds the driver's futex timeout.
type parkOS struct{ ts syscall.Timespec }

const (
	futexWaitPrivate = 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 129 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

func (p *parker) osWake() {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)), futexWakePrivate, 1, 0, 0, 0)
}

// sleepFutex is sleep in the futex system call. Early returns of the call
// (signals, spurious wake-ups) are waited out.
func (p *parker) sleepFutex(until int64, now func() int64) bool {
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
			p.osState.ts = syscall.NsecToTimespec(d)
			ts = &p.osState.ts
		}
		// Returns at once (EAGAIN) if a wake came after take.
		syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)), futexWaitPrivate, 0, uintptr(unsafe.Pointer(ts)), 0, 0)
	}
}
