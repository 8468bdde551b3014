package wheel

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newParker() *parker {
	p := new(parker)
	p.init()
	return p
}

func sinceFunc() func() int64 {
	start := time.Now()
	return func() int64 { return int64(time.Since(start)) }
}

func TestParkerWakeBeforeSleep(t *testing.T) {
	p := newParker()
	now := sinceFunc()
	p.wake()
	p.wake() // a second wake while one is pending is absorbed
	assert.True(t, p.sleep(math.MaxInt64, now), "a pending wake ends the next sleep")
	assert.False(t, p.take(), "the wake was consumed")
	assert.False(t, p.sleep(now()+int64(100*time.Microsecond), now), "no wake pending: the sleep times out")
}

func TestParkerSleepNeverEndsEarly(t *testing.T) {
	p := newParker()
	now := sinceFunc()
	for i := range 50 {
		until := now() + int64(time.Duration(i%5+1)*100*time.Microsecond)
		require.False(t, p.sleep(until, now))
		require.GreaterOrEqual(t, now(), until, "sleep %d returned before its deadline", i)
	}
	assert.False(t, p.sleep(now()-1, now), "a deadline in the past returns at once")
}

func TestParkerWakeEndsForeverSleep(t *testing.T) {
	p := newParker()
	now := sinceFunc()
	woken := make(chan bool)
	go func() { woken <- p.sleep(math.MaxInt64, now) }()
	// Whether the wake lands before or during the sleep, the sleep must end.
	p.wake()
	select {
	case ok := <-woken:
		assert.True(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("wake did not end a sleep without deadline")
	}
}
