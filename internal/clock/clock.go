// Package clock names the two clocks a node runs on, once, for the packages that share
// them (lease, owner, node, the simulation):
//
//   - Clock, the monotonic clock: time.Duration since a fixed start. Leases, timeouts
//     and every other span are measured on it; it never goes back, and nodes' need not
//     agree on anything but their rate (lease.Config.Drift).
//   - WallMs, the counters' clock: ms since the Unix epoch. It places each op in its
//     bucket (leaparray takes its readings), so nodes' must agree (owner.ClockMargin).
//
// It is a package of its own so that lease and owner take the same Clock without
// either importing the other's.
package clock

import "time"

// Clock is a node's monotonic clock and its timers. Production uses Real; a simulation
// runs one per node on its scheduler.
type Clock interface {
	// Since is the time elapsed since a fixed start: it never goes back.
	Since() time.Duration
	// AfterFunc calls f once after d, unless stop is called first (stop reports whether
	// it stopped it). f runs on another goroutine, or as a later event.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// WallMs reads the counters' clock: ms since the Unix epoch. It is a timestamp that
// places ops in buckets, not elapsed time, and is read under locks: it must only read
// a clock.
type WallMs func() int64

// processStart is Real's fixed start: every Real clock of a process reads the same.
var processStart = time.Now()

// Real is the process's monotonic clock (time since the process started) and its
// timers.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Since() time.Duration { return time.Since(processStart) }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
