package lag

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CPU is a reading of the machine's CPU accounts: the time all CPUs spent
// busy (user, nice, system, irq, softirq; guests are inside user) and
// stolen by the hypervisor, and this process's own user + system time.
// Linux's /proc counts in clock ticks of 10 ms: diff two readings taken
// over much longer.
type CPU struct {
	Busy, Steal, Own time.Duration
	CPUs             int // cpuN lines
}

// Sub returns the CPU used between reading o and c; CPUs is c's.
func (c CPU) Sub(o CPU) CPU {
	return CPU{Busy: c.Busy - o.Busy, Steal: c.Steal - o.Steal, Own: c.Own - o.Own, CPUs: c.CPUs}
}

// Others returns the busy time that was not this process's: the CPU the
// other processes (and the kernel's work for them) took. Never negative;
// the two counters are read a moment apart.
func (c CPU) Others() time.Duration { return max(c.Busy-c.Own, 0) }

// ErrProcStat is wrapped by the errors of a /proc/stat that cannot be
// parsed.
var ErrProcStat = errors.New("lag: malformed /proc/stat")

// userHZ is the unit of /proc/stat's counters: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

// parseProcStat returns the busy and steal time summed over all CPUs (the
// "cpu" line of /proc/stat) and the number of cpuN lines.
func parseProcStat(s string) (busy, steal time.Duration, cpus int, err error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	found := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0:
		case f[0] == "cpu":
			// user nice system idle iowait irq softirq steal [guest guest_nice]
			if len(f) < 9 {
				return 0, 0, 0, fmt.Errorf("%w: %d fields in the cpu line", ErrProcStat, len(f)-1)
			}
			var v [8]uint64
			for i := range v {
				if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
					return 0, 0, 0, fmt.Errorf("%w: %q", ErrProcStat, f[i+1])
				}
			}
			busy = ticks(v[0] + v[1] + v[2] + v[5] + v[6])
			steal = ticks(v[7])
			found = true
		case strings.HasPrefix(f[0], "cpu"):
			cpus++
		}
	}
	if !found {
		return 0, 0, 0, fmt.Errorf("%w: no cpu line", ErrProcStat)
	}
	return busy, steal, cpus, nil
}

func ticks(n uint64) time.Duration { return time.Duration(n) * (time.Second / userHZ) }
