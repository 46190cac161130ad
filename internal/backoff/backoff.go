// Package backoff is the one growing wait between retries in leapcount: it starts at
// Initial and doubles up to Max.
package backoff

import "time"

// Policy is a doubling wait.
type Policy struct {
	Initial, Max time.Duration
}

// Next is the wait after the wait d; the first (d <= 0) is Initial.
func (p Policy) Next(d time.Duration) time.Duration {
	if d <= 0 {
		return p.Initial
	}
	return min(2*d, p.Max)
}
