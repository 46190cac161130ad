// Package owner is the owner's side of counters: it decides the ops of the counters
// this node owns, keeps them in Redis behind its memory, and hands them on when the
// ring moves them to another node.
//
// # Persistence (with Redis)
//
// Redis holds every counter's truth; memory holds the counters this node decides,
// plus what they gained since the last flush. Every FlushInterval (100 ms by default)
// the owner drains those deltas from the store and writes them to Redis in a few
// pipelined multi-counter script calls (package fallback), off the request path. A
// node killed with SIGKILL loses at most what it gained since its last flush. Deltas
// whose write failed are kept and written again, so write-behind resumes when Redis
// returns.
//
// A counter that is not in memory is loaded from Redis on first use, before the op is
// decided, so a new owner never answers from an empty counter.
//
// # Handoff: through Redis, and directly without it
//
// When the ring moves partitions away from this node, it stops deciding them at once
// (the router sends their ops to the new owner), takes their counters out of memory,
// writes what they had not yet persisted, and only then sends the new owner a Handoff
// naming the partitions it released. The new owner holds the ops of a partition it
// gained from a live node until that Handoff arrives (at most HandoffWait), so its
// first load from Redis sees everything the old owner counted: the old owner stops
// before the new one starts, and no count is lost or counted twice. Merges in Redis add
// per bucket; a retried Handoff is applied once (by ID).
//
// The transfer goes through Redis, not node to node, because Redis must hold the state
// anyway (for fallback and to survive crashes): one path for graceful and ungraceful
// changes alike, and nothing to reconcile between two copies. Without Redis there is
// nowhere else for state to go, so the Handoffs carry the counters themselves, merged
// additively by the new owner; a node that crashes then loses its counters.
//
// # Fallback writes and stale memory
//
// When another node cannot reach this one, it decides this node's ops on Redis and
// journals their counters for this node (fallback.Journal). Every flush, the owner takes
// its journal and drops those counters from memory (after writing their deltas), so the
// next op loads them from Redis with the outage's counts included. A node that learns it
// was suspected or declared dead (its gossip incarnation rose) cannot know what others
// decided meanwhile: Forget drops all it holds, after writing its deltas, and everything
// is loaded again.
//
// # Locks
//
// decide is held shared while a batch of ops is decided and exclusively while counters
// leave memory (no I/O under it). load is held shared by a load from Redis and
// exclusively from the moment counters leave memory until their deltas are written, so
// a load never reads Redis before the deltas of a counter that just left are there.
// writes is held from draining deltas until they are written, so a release (which tells
// the new owner to load) waits for a regular flush in flight. Order: decide, load, writes.
package owner
