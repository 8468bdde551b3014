package wheel

import (
	"errors"
	"fmt"
	"time"
)

// Tick limits accepted by WithTick.
const (
	MinTick     = 100 * time.Microsecond
	MaxTick     = time.Hour
	DefaultTick = time.Millisecond
)

// ErrTick is the error Validate returns (wrapped, with the tick) for a tick
// outside [MinTick, MaxTick].
var ErrTick = errors.New("wheel: tick out of range")

type config struct {
	tick         time.Duration
	clock        *ManualClock
	exec         func(func())
	batchEnd     func()
	syscallSleep bool
}

// Option configures a Wheel.
type Option func(*config)

// WithTick sets the wheel's resolution (default 1ms). It must lie within
// [MinTick, MaxTick]: Validate reports a tick outside as an error, and New
// panics on it.
func WithTick(d time.Duration) Option {
	return func(c *config) { c.tick = d }
}

// WithClock drives the wheel by a ManualClock instead of the monotonic clock:
// no goroutine is started, and timers fire synchronously inside
// ManualClock.Advance. A ManualClock drives at most one wheel.
func WithClock(c *ManualClock) Option {
	return func(cfg *config) { cfg.clock = c }
}

// WithExecutor hands each expired timer's callback to exec instead of running
// it on the wheel's goroutine. exec itself runs on the wheel's goroutine and
// must not block; it lets callers route expiries to their own event loops.
func WithExecutor(exec func(f func())) Option {
	return func(c *config) { c.exec = exec }
}

// WithBatchEnd calls f on the wheel's goroutine after every wake-up (or
// ManualClock.Advance) in which at least one timer fired, once all of them
// have been called back or handed to the executor. Servers use it to hand a
// whole batch of expiries to each event loop at once.
func WithBatchEnd(f func()) Option {
	return func(c *config) { c.batchEnd = f }
}

// WithSyscallSleep makes the wheel's goroutine take every sleep in a system
// call (futex) on Linux, instead of only the last 2 ms before a timer falls
// due; elsewhere, and with a ManualClock, it has no effect.
//
// A runtime timer belongs to a P. When every P is held by a goroutine
// waiting in a blocking system call (gnet's event loops in epoll_wait, one
// per P), nothing runs those timers until such a goroutine passes through
// the scheduler or the runtime's monitor takes a P back: a 1 ms sleep ends
// milliseconds late (BenchmarkWake_Lateness, docs/perf.md), and the
// wheel's timers fire that late. The first remedy is a P to spare
// (GOMAXPROCS above the number of such goroutines): an idle P's thread runs
// every P's due timers on time. This option is the other: the kernel wakes
// a thread sleeping in futex on time.
//
// It has costs (docs/design.md): the sleeping goroutine keeps its P, so
// with a loop on every P a loop that wakes meanwhile may wait for the
// monitor to free one; and with every P in a system call the monitor keeps
// taking them back, which costs the process CPU. netserver therefore
// leaves a P to spare instead. Programs whose goroutines block only
// through the runtime's network poller, as net.Conn users do, need
// neither.
//
// Without this option the wheel still sleeps in futex, on Linux with
// GOMAXPROCS above 1 when New runs, for the last 2 ms before a timer falls
// due: a runtime-timer sleep ends 0-1 ms late even with a P to spare, and
// that lateness would go straight to the timer.
func WithSyscallSleep() Option {
	return func(c *config) { c.syscallSleep = true }
}

// Validate reports whether opts would make a valid wheel: an error wrapping
// ErrTick, which says what is allowed, for a tick out of range. Use it where
// options come from flags or configuration; New panics on the same error.
func Validate(opts ...Option) error {
	_, err := configOf(opts)
	return err
}

func configOf(opts []Option) (config, error) {
	cfg := config{tick: DefaultTick}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.tick < MinTick || cfg.tick > MaxTick {
		return cfg, fmt.Errorf("%w: %v not in [%v, %v]", ErrTick, cfg.tick, MinTick, MaxTick)
	}
	return cfg, nil
}
