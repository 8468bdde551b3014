package wheel

import (
	"errors"
	"fmt"
	"time"

	"github.com/netwheel/netwheel/internal/setting"
)

// Tick limits accepted by WithTick.
const (
	MinTick     = 100 * time.Microsecond
	MaxTick     = time.Hour
	DefaultTick = time.Millisecond
)

// ErrTick is wrapped by Validate's error for a tick out of range.
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

// WithTick sets the wheel's resolution; 0 means DefaultTick (1ms), as a
// zero tick does everywhere in netwheel. Any other value must lie within
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

// WithSyscallSleep makes the wheel's goroutine take every sleep in futex
// on Linux, instead of only the last 2 ms before a timer falls due;
// elsewhere, and with a ManualClock, it has no effect. When every P is held
// by a goroutine blocked in a system call (gnet's event loops in
// epoll_wait), the runtime's timers run late, and so would the wheel's
// sleeps on them (BenchmarkWake_Lateness, docs/perf.md); the kernel wakes
// a futex sleeper on time. It costs the process CPU, and the sleeper keeps
// its P (docs/design.md): a P to spare (GOMAXPROCS above the number of
// such goroutines) is the other remedy, the one netserver takes. Programs
// whose goroutines block only through the network poller need neither.
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

// ResolveTick returns the tick a wheel built WithTick(d) runs at: d, or
// DefaultTick for 0; or Validate's error. It is the one place the wheel's
// default is applied: a configuration that holds a tick resolves it here
// rather than copying DefaultTick. Any goroutine.
func ResolveTick(d time.Duration) (time.Duration, error) {
	d = setting.Or(d, DefaultTick)
	if d < MinTick || d > MaxTick {
		return d, fmt.Errorf("%w: %v not in [%v, %v]", ErrTick, d, MinTick, MaxTick)
	}
	return d, nil
}

func configOf(opts []Option) (config, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	cfg.tick, err = ResolveTick(cfg.tick)
	return cfg, err
}
