package netserver

import (
	"time"

	"github.com/netwheel/netwheel/internal/setting"
)

// Default limits, used where a Limits field is zero.
const (
	DefaultOutputHard     = 4 << 20          // queued output that closes a connection at once
	DefaultOutputSoft     = 1 << 20          // queued output that may last only OutputSoftFor
	DefaultOutputSoftFor  = 10 * time.Second // how long output may stay above OutputSoft
	DefaultUnackedBytes   = 1 << 20          // unacknowledged DATA payload per connection (Framed)
	DefaultPingsPerSecond = 100              // PINGs a peer may send per second, and at once (Framed)
)

// Limits bound what one connection may hold in the server's memory, in the
// manner of Redis's client-output-buffer-limit. Every zero field means its
// default (Default*), so the zero Limits is on; Off (exactly -1) turns
// that bound off, and any other negative value is an error. Crossing a bound closes only that connection: with
// ReasonOutputLimit for queued output, with ReasonUnackedLimit for
// unacknowledged data. The close is logged at warn level with the sizes.
//
// Queued output is what the server has written to a connection that the
// kernel's socket buffer has not taken yet: gnet's outbound buffer for the
// connection, plus what the running event has batched for it. It grows only
// when the peer reads slower than the server writes.
type Limits struct {
	// OutputHard closes the connection as soon as its queued output would
	// exceed this many bytes. 0 means DefaultOutputHard (4 MiB).
	OutputHard int
	// OutputSoft and OutputSoftFor close the connection when its queued
	// output has stayed above OutputSoft bytes for OutputSoftFor, measured
	// from the first time the server saw it above (it looks when it writes
	// to the connection and a few times per OutputSoftFor while output is
	// queued). A burst above it that drains in time is allowed. 0 means
	// DefaultOutputSoft (1 MiB) and DefaultOutputSoftFor (10 s); the
	// default soft limit is left off under an OutputHard below it.
	OutputSoft    int
	OutputSoftFor time.Duration
	// UnackedBytes bounds the DATA payload bytes sent and not yet
	// acknowledged (Framed), which the server keeps for retransmission:
	// Send fails with ErrUnackedLimit beyond it (Echo then closes with
	// ReasonUnackedLimit). retransmit.Config.Window bounds their number.
	// 0 means DefaultUnackedBytes (1 MiB).
	UnackedBytes int
	// PingsPerSecond bounds the PINGs a peer may send (Framed): a second's
	// worth at once, then that many a second. A PING beyond it closes the
	// connection with ReasonPingFlood: answering a flood of PINGs would
	// spend the event loop's time, and other connections', on a peer that
	// gains nothing from it (HTTP/2's ping flood; gRPC's too_many_pings).
	// 0 means DefaultPingsPerSecond (100).
	PingsPerSecond int
}

// limits are Limits with the defaults filled in and "off" as the largest int.
type limits struct {
	outputHard    int
	outputSoft    int
	outputSoftFor time.Duration // 0: no soft limit
	unackedBytes  int
	pingInterval  time.Duration // 0: PINGs unlimited
}

// withDefaults is l with every zero field replaced by its default, the
// Framed-only ones (UnackedBytes, PingsPerSecond) only when framed, and
// OutputSoft and OutputSoftFor both Off when either is. It is the one
// place the Default* limits are applied.
func (l Limits) withDefaults(framed bool) Limits {
	l.OutputHard = setting.Or(l.OutputHard, DefaultOutputHard)
	// The default soft limit above a hard one given could never act (the
	// hard limit closes first), and Validate refuses such a pair: left off.
	l.OutputSoft = setting.Or(l.OutputSoft, setting.Unless(l.OutputHard < 0 || DefaultOutputSoft <= l.OutputHard, DefaultOutputSoft))
	l.OutputSoftFor = setting.Or(l.OutputSoftFor, DefaultOutputSoftFor)
	if l.OutputSoft == Off || l.OutputSoftFor == Off {
		l.OutputSoft, l.OutputSoftFor = Off, Off
	}
	if framed {
		l.UnackedBytes = setting.Or(l.UnackedBytes, DefaultUnackedBytes)
		l.PingsPerSecond = setting.Or(l.PingsPerSecond, DefaultPingsPerSecond)
	}
	return l
}

// run is l, resolved by withDefaults, in the form the event loops read.
func (l Limits) run() limits {
	r := limits{
		outputHard:    setting.Bound(l.OutputHard),
		outputSoft:    setting.Bound(l.OutputSoft),
		outputSoftFor: max(l.OutputSoftFor, 0),
		unackedBytes:  setting.Bound(l.UnackedBytes),
	}
	if l.PingsPerSecond > 0 {
		r.pingInterval = max(time.Second/time.Duration(l.PingsPerSecond), 1)
	}
	return r
}

// outputLook is how often queued output is looked at: a quarter of the
// shorter of the write-stall timeout and OutputSoftFor (0: never, neither is
// on), so either closes at most a quarter late.
func outputLook(stall, softFor time.Duration) time.Duration {
	d := time.Duration(0)
	for _, t := range []time.Duration{stall, softFor} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d / 4
}
