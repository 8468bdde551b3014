// Package limits reads and raises the process limits that bound a load
// test: open files, ephemeral ports, memory and CPU use. Linux only in
// substance; elsewhere the readers report zeros.
package limits

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RaiseFiles raises the soft RLIMIT_NOFILE to the hard limit and returns
// the new soft limit.
func RaiseFiles() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("limits: getrlimit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("limits: setrlimit: %w", err)
		}
	}
	return lim.Cur, nil
}

// EphemeralPorts returns how many local ports one source address has for
// outgoing connections to one destination (Linux's ip_local_port_range),
// or 28232, Linux's default, if it cannot tell.
func EphemeralPorts() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && hi >= lo {
				return hi - lo + 1
			}
		}
	}
	return 28232
}

// OpenFiles counts this process's open file descriptors, or -1.
func OpenFiles() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// Memory returns the current and peak resident set size in bytes (VmRSS,
// VmHWM), or zeros.
func Memory() (rss, peak int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	rss, peak, _ = parseStatus(f)
	return rss, peak
}

// ErrNoRSS is wrapped by RSS's error when the process's status has no
// VmRSS line (a zombie, or a system without /proc).
var ErrNoRSS = errors.New("limits: no VmRSS in the process status")

// RSS returns the resident set size in bytes (VmRSS of /proc/PID/status)
// of process pid, or of this process for pid 0. It reads one small file;
// safe from any goroutine. Another user's process may be unreadable.
func RSS(pid int) (int64, error) {
	path := procPath(pid, "status")
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("limits: %w", err)
	}
	defer f.Close()
	rss, _, ok := parseStatus(f)
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNoRSS, path)
	}
	return rss, nil
}

// parseStatus reads VmRSS and VmHWM (in bytes) out of a /proc/PID/status
// text; ok reports whether it had a VmRSS line.
func parseStatus(r io.Reader) (rss, peak int64, ok bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), ":")
		if !found || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss, ok = kb<<10, true
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak, ok
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 ticks a second for every architecture's user-space
// interface, whatever the kernel's internal HZ.
const userHZ = 100

// ErrStat is wrapped by ProcCPU's error when /proc/PID/stat cannot be
// parsed.
var ErrStat = errors.New("limits: malformed /proc/PID/stat")

// ProcCPU returns the user plus system CPU time (utime + stime of
// /proc/PID/stat, all its threads) that process pid has used so far, or
// this process's for pid 0. The resolution is a clock tick, 10 ms: diff two
// readings over a phase that uses much more. It reads one small file; safe
// from any goroutine.
func ProcCPU(pid int) (time.Duration, error) {
	path := procPath(pid, "stat")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("limits: %w", err)
	}
	utime, stime, err := parseStat(string(b))
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, path)
	}
	return ticks(utime + stime), nil
}

// ticks converts a count of USER_HZ clock ticks to a duration.
func ticks(n uint64) time.Duration {
	return time.Duration(n) * (time.Second / userHZ)
}

// parseStat returns utime and stime (fields 14 and 15, in clock ticks) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// itself hold spaces and parentheses, so the fields are counted from the
// last ')'.
func parseStat(s string) (utime, stime uint64, err error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, ErrStat
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	const utimeAt, stimeAt = 14 - 3, 15 - 3
	if len(f) <= stimeAt {
		return 0, 0, ErrStat
	}
	if utime, err = strconv.ParseUint(f[utimeAt], 10, 64); err != nil {
		return 0, 0, ErrStat
	}
	if stime, err = strconv.ParseUint(f[stimeAt], 10, 64); err != nil {
		return 0, 0, ErrStat
	}
	return utime, stime, nil
}

// CPU returns the process's user plus system CPU time so far.
func CPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procPath returns the path of file name under /proc for process pid, or
// for this process if pid is 0.
func procPath(pid int, name string) string {
	if pid == 0 {
		return "/proc/self/" + name
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}
