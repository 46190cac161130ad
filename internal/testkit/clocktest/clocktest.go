// Package clocktest is a manual clock for tests: milliseconds since the Unix epoch that
// move only when the test says so, so that every answer about time is deterministic.
package clocktest

import "sync/atomic"

// Clock is safe for concurrent use.
type Clock struct{ ms atomic.Int64 }

// New returns a clock that reads startMs.
func New(startMs int64) *Clock {
	c := &Clock{}
	c.ms.Store(startMs)
	return c
}

// Now is the time in ms.
func (c *Clock) Now() int64 { return c.ms.Load() }

// Advance moves the clock forward by ms.
func (c *Clock) Advance(ms int64) { c.ms.Add(ms) }
