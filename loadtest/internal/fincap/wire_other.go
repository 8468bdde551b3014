//go:build !linux

package fincap

import "fmt"

// Open fails with ErrUnsupported: the capture is Linux's.
func Open(port uint16) (*Capture, error) {
	return nil, fmt.Errorf("%w: not Linux", ErrUnsupported)
}
