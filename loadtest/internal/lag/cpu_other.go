//go:build !linux

package lag

import "errors"

// ReadCPU reports that the machine's CPU accounts are not read here: only
// Linux's /proc is.
func ReadCPU() (CPU, error) {
	return CPU{}, errors.New("lag: the other processes' CPU is read from Linux's /proc only")
}
