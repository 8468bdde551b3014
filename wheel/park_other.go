//go:build !linux

package wheel

const haveFutex = false

type parkOS struct{}

func (p *parker) osWake() {}

func (p *parker) sleepFutex(until int64, now func() int64) bool { panic("wheel: no futex") }
