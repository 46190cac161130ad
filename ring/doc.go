// Package ring decides which node owns a counter: a pure, immutable placement table
// built from a member set, with no I/O and no clock.
//
// Keys are hashed into Redis Cluster's 16384 hash slots (package hashslot: CRC16 of the
// key's {hash tag}, as Redis computes it), slots are grouped into a fixed number of
// partitions of contiguous slots (4096 of 4 by default), and partitions are spread over
// members under a load bound: no member owns more than about Load times the average
// (Config.MaxShare). Ownership is by key only: a counter is identified by (key, window,
// buckets), but every shape of one key lives on the same owner, so an operation never
// needs more than one node per key.
//
// # Placements
//
// PlacementMatching (the default) is a stable matching: each partition ranks members
// by a rendezvous hash (xxhash64 of the member name's hash and the partition number),
// each member keeps, up to the bound, the partitions that rank it highest. With Load
// 1.1 the busiest member owns at most 1.1 times the average. PlacementConsistent is consistent hashing with bounded loads
// (github.com/buraksezer/consistent, 200 virtual nodes a member, Load 1.25), the
// placement of releases before matching: its busiest member owned up to 1.25 times the
// average, so a cluster's capacity was a fifth below its sum. Consistent is that
// Config, kept so that a cluster in a rolling upgrade can still agree with its old
// members (the node package switches once every member supports matching).
// TestPlacementAtScale logs, for both, the spread and the share a join or a leave moves.
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
// Placement is a function of the exact behaviour of the libraries it hashes with:
// xxhash64's output, and for PlacementConsistent how consistent names virtual nodes
// ("%s%d" of name and index), hashes partition numbers (little-endian uint64) and walks
// the ring under the load bound. Both are pinned in go.mod (consistent v0.10.0,
// xxhash/v2 v2.3.0): nodes built against other versions could disagree on owners, so
// upgrading either one is a cluster-wide, all-at-once change, and so is changing Config
// other than by the placement switch above.
//
// # Limits
//
// The bound needs room for every partition: with Load > 1 and at most P members,
// M·MaxShare(M) ≥ P always holds. PlacementConsistent also needs two virtual
// nodes a member (its walk skips one of them), or consistent panics. New never panics:
// a ring that cannot be built (no members, more members than partitions, an invalid
// Config) owns nothing, answers ok=false to every lookup, and says why in Err.
//
// A join or leave can also move partitions between surviving members, not only to
// or from the member that changed: the bound steps with floor(P/M), and a member at a
// lower bound sheds partitions, at a higher one takes back those it had shed. The
// tighter the bound, the more members sit at it: at 64 members PlacementMatching's
// join moves about 1.19/N of the partitions (up to 1.33/N over the name sets tested)
// and a leave 1.20/N (1.36/N), PlacementConsistent's about 1.02/N (1.28/N) and
// 1.06/N (1.25/N) with its looser bound. More partitions put the bound further above
// the average share, in standard deviations of it: with 16384 (one a slot) a join
// moves about 1.0/N (up to 1.1/N) and a leave 1.01/N (1.15/N), which is why a node
// may be started with more (node --partitions).
//
// A Ring is immutable and safe for concurrent use; a membership change builds a new
// Ring, and Moved lists the partitions whose owner changed, for their release.
package ring
