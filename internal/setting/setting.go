// Package setting is netwheel's one rule for configuration values, written
// once so that wheel, idle, retransmit, netserver and the binaries apply it
// alike: zero means the default the field documents, Off (exactly -1)
// turns a protection off, and any other negative value is an error that
// names the field and the rule. A setting that cannot be off refuses Off
// too. Each package wraps the errors returned here with its own sentinel.
package setting

import (
	"fmt"
	"math"
	"net"
	"time"
)

// Off is the one value that turns a protection off: -1, in a count or a
// duration alike.
const Off = -1

// Number is a setting's type: a count or a time.Duration.
type Number interface{ ~int | ~int64 }

// Or returns def for a zero v and v otherwise, Off included: the default
// resolved once, by the package whose field it is.
func Or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Unless returns d when on, and Off otherwise: the default of a setting
// that applies only where on holds.
func Unless[T Number](on bool, d T) T {
	if on {
		return d
	}
	return Off
}

// Check returns an error naming field when v is negative but not Off: a
// typo must not turn a protection off.
func Check[T Number](field string, v T) error {
	if v < 0 && v != Off {
		return fmt.Errorf("%s %v is negative: 0 means the default, -1 (Off) turns it off, and no other negative value is allowed", field, v)
	}
	return nil
}

// CheckOn returns an error naming field when v is negative: the setting
// cannot be off.
func CheckOn[T Number](field string, v T) error {
	if v < 0 {
		return fmt.Errorf("%s %v is negative: 0 means the default, and it cannot be off", field, v)
	}
	return nil
}

// CheckTick returns an error naming field when d is a deadline shorter than
// the wheel's tick, which cannot time it: 0 and Off are not deadlines.
func CheckTick(field string, d, tick time.Duration) error {
	if d > 0 && d < tick {
		return fmt.Errorf("%s %v is shorter than the timer wheel's tick %v, the finest deadline it can keep", field, d, tick)
	}
	return nil
}

// Bound returns n, or the largest int for Off: a bound that is off is
// never reached.
func Bound(n int) int {
	if n == Off {
		return math.MaxInt
	}
	return n
}

// CheckAddr returns an error naming field unless addr is a TCP address to
// listen on, host:port, whose port is a number in [0, 65535] or a service
// name.
func CheckAddr(field, addr string) error {
	if addr == "" {
		return fmt.Errorf("%s is empty: want host:port, e.g. 127.0.0.1:9000", field)
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%s %q: %v", field, addr, err)
	}
	return nil
}
