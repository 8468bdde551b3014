package wheel

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newParker(spell int) *parker {
	p := new(parker)
	p.init(int64(250*time.Microsecond), spell)
	return p
}

func sinceFunc() func() int64 {
	start := time.Now()
	return func() int64 { return int64(time.Since(start)) }
}

// modes runs f with a parker that sleeps on the timer, and with one that
// sleeps in futex (where there is one).
func modes(t *testing.T, f func(t *testing.T, p *parker)) {
	t.Run("timer", func(t *testing.T) { f(t, newParker(0)) })
	t.Run("futex", func(t *testing.T) {
		p := newParker(math.MaxInt)
		p.futexLeft = math.MaxInt
		f(t, p)
	})
}

func TestParker_WakeBeforeSleep(t *testing.T) {
	modes(t, func(t *testing.T, p *parker) {
		now := sinceFunc()
		p.wake()
		p.wake() // a second wake while one is pending is absorbed
		assert.True(t, p.sleep(math.MaxInt64, now), "a pending wake ends the next sleep")
		assert.False(t, p.take(), "the wake was consumed")
		assert.False(t, p.sleep(now()+int64(100*time.Microsecond), now), "no wake pending: the sleep times out")
	})
}

func TestParker_SleepNeverEndsEarly(t *testing.T) {
	modes(t, func(t *testing.T, p *parker) {
		now := sinceFunc()
		for i := range 50 {
			until := now() + int64(time.Duration(i%5+1)*100*time.Microsecond)
			require.False(t, p.sleep(until, now))
			require.GreaterOrEqual(t, now(), until, "sleep %d returned before its deadline", i)
		}
		assert.False(t, p.sleep(now()-1, now), "a deadline in the past returns at once")
	})
}

func TestParker_WakeEndsForeverSleep(t *testing.T) {
	modes(t, func(t *testing.T, p *parker) {
		now := sinceFunc()
		for range 20 {
			woken := make(chan bool)
			go func() { woken <- p.sleep(math.MaxInt64, now) }()
			// Whether the wake lands before or during the sleep, the sleep must end.
			p.wake()
			select {
			case ok := <-woken:
				require.True(t, ok)
			case <-time.After(10 * time.Second):
				t.Fatal("wake did not end a sleep without deadline")
			}
		}
	})
}

func TestParker_LateTimerSwitchesToFutexForASpell(t *testing.T) {
	p := newParker(3)
	p.timerWoke(int64(250 * time.Microsecond))
	assert.Zero(t, p.futexLeft, "on time within the limit: stay on the timer")
	p.timerWoke(int64(251 * time.Microsecond))
	assert.Equal(t, 3, p.futexLeft, "late: futex for the spell")
	assert.Equal(t, uint64(1), p.switches.Load())
	if !haveFutex {
		return
	}
	now := sinceFunc()
	for i := 3; i > 0; i-- {
		require.False(t, p.sleep(now()+int64(50*time.Microsecond), now))
		assert.Equal(t, i-1, p.futexLeft, "each sleep of the spell counts")
	}
	// Back on the timer: this sleep either ended on time, or late enough to
	// switch again.
	require.False(t, p.sleep(now()+int64(50*time.Microsecond), now))
	onTime := p.futexLeft == 0 && p.switches.Load() == 1
	lateAgain := p.futexLeft == 3 && p.switches.Load() == 2
	assert.True(t, onTime || lateAgain, "left %d, switches %d", p.futexLeft, p.switches.Load())
}
