package lagmeter_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netwheel/netwheel/internal/lagmeter"
)

func TestMeter_SumsLatenessBeyondTheFloor(t *testing.T) {
	m := lagmeter.Start()
	m.Stop() // the sampler no longer adds anything of its own
	base := m.Stalled()
	for _, late := range []time.Duration{0, lagmeter.Floor, lagmeter.Floor + 3*time.Millisecond, 50 * time.Millisecond, -time.Millisecond} {
		m.Record(late)
	}
	assert.Equal(t, 3*time.Millisecond+(50*time.Millisecond-lagmeter.Floor), m.Stalled()-base)
	assert.Equal(t, 50*time.Millisecond, m.Worst())
	assert.Equal(t, 10*time.Millisecond+2*m.Stalled(), m.Slack(10*time.Millisecond))
}

// TestMeter_SeesTheProcessStopped: a process kept off the CPU (here
// stopped outright by a signal, as a busy machine does it in slices) is
// measured as stalled for about as long.
func TestMeter_SeesTheProcessStopped(t *testing.T) {
	const stopped = 200 * time.Millisecond
	m := lagmeter.New(t)
	time.Sleep(10 * time.Millisecond) // the sampler is running
	before := m.Stalled()
	pid := strconv.Itoa(os.Getpid())
	cmd := exec.Command("sh", "-c", "kill -STOP "+pid+"; sleep 0.2; kill -CONT "+pid)
	require.NoError(t, cmd.Run())
	time.Sleep(10 * time.Millisecond) // the sampler's late wake is recorded
	got := m.Stalled() - before
	assert.GreaterOrEqual(t, got, stopped-50*time.Millisecond, "the stop was not measured")
	assert.GreaterOrEqual(t, m.Worst(), stopped-50*time.Millisecond)
}

func TestMeter_StopEndsTheSampler(t *testing.T) {
	before := goleak.IgnoreCurrent()
	m := lagmeter.Start()
	m.Stop()
	m.Stop()
	// Stop waited for the goroutine's wg.Done; goleak waits for it to exit.
	goleak.VerifyNone(t, before) // nothing outlives Stop
	after := m.Stalled()
	time.Sleep(5 * time.Millisecond)
	assert.Equal(t, after, m.Stalled(), "nothing is added after Stop")
}
