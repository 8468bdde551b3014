// Package retransmit implements RFC 6298 retransmission timeouts for the
// messages of a connection, on a wheel.Wheel.
//
// It has two layers. An Estimator turns round-trip time samples into a
// retransmission timeout (RTO): SRTT and RTTVAR with alpha 1/8 and beta 1/4,
// RTO = SRTT + max(G, 4*RTTVAR) clamped to [MinRTO, MaxRTO], doubled on each
// timeout and restored by the next valid sample, in integer nanoseconds with
// documented rounding; Linux's variant, which floors the variance term
// rather than the RTO, is an option. A Tracker follows one connection's
// outstanding messages by sequence number, takes RTT samples under Karn's
// rule, and runs RFC 6298 section 5's single retransmission timer on one
// embedded wheel.Timer: it asks the server to resend the oldest
// unacknowledged message when the timer expires, and gives up, with a
// *GiveUpError the server can log as the close reason, after MaxRetransmits
// retransmissions or GiveUpAfter without an ack.
//
// One default departs from the RFC: the minimum RTO (Config.MinRTO)
// defaults to 200 ms, Linux's TCP_RTO_MIN, under either Variant, where RFC
// 6298 section 2.4 says an RTO below 1 s SHOULD be rounded up to 1 s. The
// RFC's floor suits a path whose RTT is unknown or long; for an
// application-level ack deadline on a datacenter or LAN path it would make
// every loss wait a second. Set MinRTO to time.Second for the RFC's floor.
//
// Zero values follow one rule, as everywhere in netwheel: a zero Config
// field means its documented default, Off (exactly -1) turns a give-up
// limit off, and any other negative value is an error (see Config).
//
// The package is pure logic: it never reads the system clock. Callers pass
// now, a reading of the Tracker's wheel (Wheel.Now), to every per-message
// call; the timer's expiry reads the wheel's clock itself. Hooks run on
// the wheel's goroutine and must not block. Tests drive everything with a
// wheel.ManualClock, as the examples do.
//
// The per-message paths (Sent, Acked, AckedThrough) are O(1) amortized and
// allocation-free in steady state; a Tracker costs a few hundred bytes plus
// 24 bytes per slot of its ring of outstanding messages.
//
// When not to use it: over a reliable byte stream such as TCP, the kernel
// already retransmits; a Tracker is for message protocols that must detect
// and repair loss themselves (over UDP, or end-to-end across proxies), or
// for application-level ack deadlines. For one request with one deadline, a
// plain timer is simpler.
package retransmit
