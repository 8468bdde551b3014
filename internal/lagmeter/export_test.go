package lagmeter

import "time"

// Record adds one wake's lateness, as the sampler does.
func (m *Meter) Record(late time.Duration) { m.record(late) }
