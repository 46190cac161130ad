// Package ntp estimates how far another clock is from this node's, as NTP does from one
// exchange: this node reads its clock as it sends (t0), the other reads its own as the
// request arrives (t1) and as it answers (t2), and this node reads its clock again as the
// answer arrives (t3). If the way there took as long as the way back, the other clock
// is ((t1-t0)+(t2-t3))/2 ahead of this one; whatever the two ways took, it is within
// half the round trip's time on the wire, (t3-t0)-(t2-t1), of that. A single reading of
// the other clock (Redis's TIME) is an exchange with t1 = t2.
//
// The clocks are the counters' clocks (ms since the Unix epoch, docs/guarantees.md),
// which place every op in its bucket: what two nodes or a node and Redis must agree
// on. Their readings are whole milliseconds, so an estimate is also off by up to a
// millisecond more than Err says.
package ntp

import "time"

// Estimate is another clock against this node's, from one exchange.
type Estimate struct {
	// Offset is how far the other clock is ahead of this node's (negative: behind).
	Offset time.Duration
	// Err bounds Offset's error either way: half the exchange's time on the wire.
	Err time.Duration
	// At is when the exchange ended, on the monotonic clock of whoever keeps the
	// estimate (its age tells whether it is still known).
	At time.Duration
}

// FromExchange is the estimate of one exchange: t0 and t3 this node's clock as it sent
// and as the answer came back, t1 and t2 the other clock as the request arrived and as
// it answered; at is when on the keeper's monotonic clock.
func FromExchange(t0, t1, t2, t3, at time.Duration) Estimate {
	wire := (t3 - t0) - (t2 - t1)
	if wire < 0 {
		wire = 0 // (a clock stepped during the exchange: the estimate is no better than 0)
	}
	return Estimate{Offset: ((t1 - t0) + (t2 - t3)) / 2, Err: wire / 2, At: at}
}

// FromReading is the estimate from one reading r of the other clock, taken between t0
// and t3 of this node's.
func FromReading(t0, r, t3, at time.Duration) Estimate { return FromExchange(t0, r, r, t3, at) }

// Ms is a reading of a clock in milliseconds, as a Duration.
func Ms(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// Known reports whether e is an estimate (At set) made at most maxAge before now (the
// keeper's monotonic clock) and no looser than maxErr.
func (e Estimate) Known(now, maxAge, maxErr time.Duration) bool {
	return e.At > 0 && now-e.At <= maxAge && e.Err <= maxErr
}

// Within reports whether the other clock is certainly within margin of this node's:
// Offset, give or take Err, lies in [-margin, margin].
func (e Estimate) Within(margin time.Duration) bool {
	return abs(e.Offset)+e.Err <= margin
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
