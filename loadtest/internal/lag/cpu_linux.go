package lag

import (
	"fmt"
	"os"

	"github.com/netwheel/netwheel/internal/limits"
)

// ReadCPU reads the machine's CPU accounts and this process's CPU time
// from /proc. Safe from any goroutine.
func ReadCPU() (CPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPU{}, fmt.Errorf("lag: %w", err)
	}
	busy, steal, cpus, err := parseProcStat(string(b))
	if err != nil {
		return CPU{}, err
	}
	own, err := limits.ProcCPU(0)
	if err != nil {
		return CPU{}, err
	}
	return CPU{Busy: busy, Steal: steal, Own: own, CPUs: cpus}, nil
}
