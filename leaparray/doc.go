// Package leaparray keeps sliding-window counters: a ring of time buckets per counter
// (Sentinel's LeapArray), and a keyed, sharded store of millions of them.
//
// The package is pure: it does no I/O and never reads the clock. Every call takes now,
// in milliseconds since the Unix epoch, so tests drive time by hand.
//
// # Time
//
// A counter has a window W and B buckets of L = W/B milliseconds. Bucket j covers
// [j·L, (j+1)·L): the same on every node and in Redis. At bucket J the count is the sum
// of buckets J−B < j ≤ J.
//
// A counter remembers its head, the newest bucket it was added to, and holds the B
// buckets up to it. An operation at bucket J acts at max(J, head): when the clock steps
// back, adds go into the newest bucket and the count is the one at that bucket, so a
// step back never loses a count and never reads buckets the ring no longer holds.
// A skip forward of any size clears the buckets that left the window. A counter whose
// head is a whole window behind now counts 0 and may be forgotten (Store.Sweep).
//
// # Snapshots
//
// A counter's state can be exported as (bucket index, count) pairs and merged into
// another counter. Merging adds per bucket, so merging two halves of the traffic gives
// the counter of the whole; buckets older than the receiving counter's window are
// dropped, as they count for nothing.
//
// # Bounds
//
// A store made WithBounds caps the counters (in units, see Bounds) and the Specs that
// the bounded operations (TryIncr, TryAllow, TryReset, TrySeed) create. One that would
// create a counter in a full store first reclaims counters idle past their window, and
// then fails with ErrFull, having changed nothing; operations on counters already held
// are never refused, and cost nothing more than without bounds. The admitting
// operations (Merge, Seed) create past the caps: they take in state handed over from
// elsewhere, which must not be lost, and Admits tells whether taking it would go past
// twice the bounds.
package leaparray
