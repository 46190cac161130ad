// Package ownerprobe lets the cluster simulation (package sim) read what an
// owner.Owner holds, for its checks: whether it would decide a partition now, what of a
// counter it holds that Redis has not confirmed. These reads serve checkers only, so
// they are not part of the owner's API; nothing in production imports this package.
package ownerprobe

import "github.com/leapcount/leapcount/leaparray"

// Probe is what a checker reads of one owner.
type Probe interface {
	// Decides reports whether the owner would decide an op of partition p now (the
	// same verdict its ops get; no side effect).
	Decides(p int) bool
	// Gen is partition p's Record generation: it moves whenever the partition's memory
	// may have changed wholesale (a reload, a move, counters handed in).
	Gen(p int) uint64
	// HoldsWhole reports whether it holds the counter in memory with everything it
	// counts: in an Owned partition, and not started blind. An emptied Redis loses
	// nothing of such a counter.
	HoldsWhole(key string, sp leaparray.Spec) bool
	// Unconfirmed is how much of the counter it holds that Redis has not confirmed: its
	// pending part in memory, queued, in unconfirmed batches and in releases. A crash
	// loses at most this much of it.
	Unconfirmed(key string, sp leaparray.Spec) uint64
	// InMemory is the count of the counter at now in its memory, the store's and its
	// releases': all a crash without Redis loses of it.
	InMemory(key string, sp leaparray.Spec, now int64) uint64
	// PendingReset reports whether it holds a reset of the counter that Redis has not
	// confirmed: lost in a crash, it brings back what it erased.
	PendingReset(key string, sp leaparray.Spec) bool
	// Releasing reports how many releases (partitions being handed on) are under way.
	Releasing() int
}

// Of returns the probe of an *owner.Owner; package owner sets it as it is initialized
// (this package cannot name the owner's type: the owner imports it).
var Of func(owner any) Probe
