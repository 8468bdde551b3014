package wheel

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modes runs f with a parker on the runtime's timer, one in futex
// (WithSyscallSleep), and one on the runtime's timer whose sleeps are all
// precise (in futex where there is one).
func modes(t *testing.T, f func(t *testing.T, p *parker, precise bool)) {
	for _, tc := range []struct {
		name     string
		syscalls bool
		precise  bool
	}{{name: "timer"}, {name: "futex", syscalls: true}, {name: "precise", precise: true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.syscalls && !haveFutex {
				t.Skip("no futex on this system: WithSyscallSleep has no effect")
			}
			p := new(parker)
			p.init(tc.syscalls)
			require.Equal(t, tc.syscalls, p.syscalls)
			require.Equal(t, haveFutex, p.precise)
			f(t, p, tc.precise)
		})
	}
}

func sinceFunc() func() int64 {
	start := time.Now()
	return func() int64 { return int64(time.Since(start)) }
}

func TestParker_WakeBeforeSleep(t *testing.T) { modes(t, testParkerWakeBeforeSleep) }

func testParkerWakeBeforeSleep(t *testing.T, p *parker, precise bool) {
	now := sinceFunc()
	p.wake()
	p.wake() // a second wake while one is pending is absorbed
	assert.True(t, p.sleep(math.MaxInt64, now, precise), "a pending wake ends the next sleep")
	assert.False(t, p.take(), "the wake was consumed")
	assert.False(t, p.sleep(now()+int64(100*time.Microsecond), now, precise), "no wake pending: the sleep times out")
}

func TestParker_SleepNeverEndsEarly(t *testing.T) { modes(t, testParkerSleepNeverEndsEarly) }

func testParkerSleepNeverEndsEarly(t *testing.T, p *parker, precise bool) {
	now := sinceFunc()
	for i := range 50 {
		until := now() + int64(time.Duration(i%5+1)*100*time.Microsecond)
		require.False(t, p.sleep(until, now, precise))
		require.GreaterOrEqual(t, now(), until, "sleep %d returned before its deadline", i)
	}
	assert.False(t, p.sleep(now()-1, now, precise), "a deadline in the past returns at once")
}

func TestParker_WakeEndsSleep(t *testing.T) { modes(t, testParkerWakeEndsSleep) }

func testParkerWakeEndsSleep(t *testing.T, p *parker, precise bool) {
	now := sinceFunc()
	for i := range 40 {
		until := int64(math.MaxInt64)
		if i%2 == 1 {
			until = now() + int64(time.Hour)
		}
		woken := make(chan bool)
		go func() { woken <- p.sleep(until, now, precise) }()
		// Whether the wake lands before or during the sleep, the sleep must end.
		p.wake()
		select {
		case ok := <-woken:
			require.True(t, ok)
		case <-time.After(10 * time.Second):
			t.Fatalf("wake %d did not end the sleep", i)
		}
	}
	assert.False(t, p.take(), "every wake was consumed by its sleep")
}

// Precise sleeps (in futex) and runtime-timer sleeps alternate in the
// driver; a wake must end whichever is running, and one consumed by a
// sleep of one kind must not end a later sleep of the other early.
func TestParker_MixedSleeps(t *testing.T) {
	if !haveFutex {
		t.Skip("no futex on this system: every sleep is on the runtime's timer")
	}
	p := new(parker)
	p.init(false)
	now := sinceFunc()
	for i := range 60 {
		precise := i%2 == 0
		if i%3 == 0 {
			// Not woken: runs to its deadline, never short of it.
			until := now() + int64(200*time.Microsecond)
			require.False(t, p.sleep(until, now, precise), "sleep %d", i)
			require.GreaterOrEqual(t, now(), until, "sleep %d (precise %v) ended early", i, precise)
			continue
		}
		woken := make(chan bool)
		go func() { woken <- p.sleep(now()+int64(time.Hour), now, precise) }()
		p.wake()
		select {
		case ok := <-woken:
			require.True(t, ok, "sleep %d", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("wake %d did not end the sleep (precise %v)", i, precise)
		}
	}
	assert.False(t, p.take(), "every wake was consumed by its sleep")
}
