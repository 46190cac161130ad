// Package ring decides which node owns a counter: a pure, immutable placement table
// built from a member set, with no I/O and no clock.
//
// Keys are hashed into Redis Cluster's 16384 hash slots (package hashslot: CRC16 of the
// key's {hash tag}, as Redis computes it), slots are grouped into a fixed number of
// partitions of contiguous slots (4096 of 4 by default), and partitions are spread over
// members by consistent hashing with bounded loads (github.com/buraksezer/consistent,
// hashing member and partition names with xxhash64). Ownership is by key only: a counter
// is identified by (key, window, buckets), but every shape of one key lives on the same
// owner, so an operation never needs more than one node per key.
//
// # Agreement
//
// Every node must compute the same owner from the same member set. New therefore sorts
// members by name (and drops repeated names) before placing them: consistent hashes
// each member's virtual nodes as name+index, and when two such strings collide the
// member added later wins, so the insertion order would otherwise leak into placement.
// Epoch names a placement: rings with equal epochs (same members, same RPC addresses,
// same Config) place every key on the same member.
//
// Placement is a function of the exact behaviour of two libraries: how consistent names
// virtual nodes ("%s%d" of name and index), hashes partition numbers (little-endian
// uint64) and walks the ring under the load bound, and the xxhash64 output. Both are
// pinned in go.mod (consistent v0.10.0, xxhash/v2 v2.3.0): nodes built against other
// versions could disagree on owners, so upgrading either one is a cluster-wide,
// all-at-once change, and so is changing Config.
//
// # Limits
//
// The bounded-load walk needs room for every partition: no member may own more than
// ceil(floor(P/M)·Load) of the P partitions. With Load > 1, at most P members and at
// least two virtual nodes per member (the walk skips one of them) that always holds;
// otherwise consistent panics. New never panics: a ring that cannot be built (no
// members, more members than partitions, an invalid Config) owns nothing, answers
// ok=false to every lookup, and says why in Err.
//
// A join or leave can also move partitions between surviving members, not only to
// or from the member that changed: the bound steps with floor(P/M), and a lower bound
// makes full members shed partitions. It is worst where M members at the new bound
// barely hold P partitions, up to about a quarter of all partitions; for a handful of
// members it is a few percent (TestMovedOnJoin logs the figures).
//
// A Ring is immutable and safe for concurrent use; a membership change builds a new
// Ring, and Moved lists the partitions whose owner changed, for their release.
package ring
