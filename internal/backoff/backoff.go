// Package backoff is the one growing wait between retries in leapcount: it starts at
// Initial and grows by Factor (doubles, by default) up to Max.
package backoff

import "time"

// Policy is a growing wait.
type Policy struct {
	Initial, Max time.Duration
	// Factor multiplies each wait to make the next (0: 2). At 1 or below, every wait
	// is Initial.
	Factor float64
}

// Next is the wait after the wait d; the first (d <= 0) is Initial. No wait after the
// first is below Initial or above Max.
func (p Policy) Next(d time.Duration) time.Duration {
	if d <= 0 {
		return p.Initial
	}
	f := p.Factor
	if f == 0 {
		f = 2
	}
	next := float64(d) * f
	if next >= float64(p.Max) {
		return p.Max
	}
	return max(time.Duration(next), p.Initial)
}
