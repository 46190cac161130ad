// Package owner is the owner's side of counters: it decides the ops of the partitions
// this node holds, keeps them in Redis behind its memory, and hands them on when the
// ring moves them to another node.
//
// # One decider per partition
//
// A node decides a partition's counters only while the ring makes it the partition's
// owner and it holds the partition's lease (package lease): a majority of the voters
// granted it, which they do to one node at a time. A partition the ring gives this node
// is claimed at once; its ops wait (at most Config.AcquireWait) for the grant. A
// partition the ring takes away stops being decided at once, and stays claimed until
// its counts are where the new owner will look for them, so the new owner cannot be
// granted it before. Ops this node does not decide are answered counter.ErrNotOwner:
// certainly not applied, so the router sends them on.
//
// # Persistence (with Redis)
//
// Redis holds every counter's truth but the deltas owners have not written yet. Every
// FlushInterval the owner drains what its counters gained (resets included, in order)
// and writes it in batches whose script calls apply at most once however often they are
// sent (fallback.Batch): a call whose answer was lost is sent again with its sequence
// number, which Redis remembers per writer.
// Batches go strictly in order, and nothing newer is sent while one is unconfirmed, so
// an outage keeps the deltas in memory (one per counter and bucket, not per op) until
// Redis answers again. A node killed with SIGKILL loses what it had not written.
//
// A counter that is not in memory is loaded from Redis on first use, unless this node
// has deltas of it not yet confirmed there (then the op fails, not decided, and the
// write is hurried), or has decided its partition without a break for longer than its
// window, so Redis holds nothing of it in its window (fresh.go: no load). While Redis
// is down such counters are decided from empty memory ("blind"); when Redis is back
// those counters are dropped and reloaded (after their deltas are written), so memory
// and Redis agree again (blind.go).
//
// # Handing on
//
// When the ring moves a partition away, its counters leave memory. With Redis their
// deltas are written, and once Redis confirms them the partition is released: the new
// owner loads each counter from Redis on first use. Without Redis, or when Redis does
// not confirm within persistWait, the counters themselves go to the new owner in
// Handoffs (cut by bytes), each with the part of it not yet in Redis, which the new
// owner then writes behind; a Handoff is applied once (by ID), refused by a node that
// does not own its partitions (sent again where the ring says, as it changes), and a
// counter leaves this node only once a Handoff carrying it was applied. A write-behind
// call of them in doubt (sent as Redis went away) stays with the sender, which sends it
// again; it travels as a fence, and the receiver reads none of those partitions back
// from Redis until Redis shows it applied (fence.go). A partition the ring gives back
// before its counters came back is not decided until they do (lend.go).
//
// Handed-over counters enter memory past the store's bounds (which the counters clients
// create, and those loaded from Redis, respect): refusing them would lose their counts.
// A Handoff that would take the store past twice its bounds is refused, and its sender
// keeps the counters and sends them again until there is room. Handoffs are
// retried for as long as the node runs (stopping, for its shutdown timeout); what is
// left then is lost, and logged.
//
// # Lapses
//
// A lease that runs out while held (heartbeats failed: a pause, a partition) means
// another node may decide the partition meanwhile. With Redis the partition's memory is
// stale: its counters are dropped, their deltas written, and reloaded before it is
// decided again (while Redis is down, memory is the best there is and is used).
// Without Redis memory is what this node counted; whoever decided meanwhile hands its
// own counts back when the partition returns, and they add up.
//
// # Late writes
//
// A lapsed node writes its deltas when Redis lets it, possibly after the partition's
// next owner loaded (or skipped loading) its counters. Such a write is marked in Redis
// once confirmed, and whoever holds the partition reloads it; counters handed on
// directly, whose sender's memory may lack such a write, are reloaded once Redis has
// what came with them (late.go).
//
// # Locks
//
// decide is held shared while a batch of ops is judged and decided, and exclusively
// while partitions change state (no I/O, no scan under it): once a partition stops being
// decided no op is still being decided on it, so its counters can leave memory without
// losing an add, shard by shard, while every other partition keeps being decided. Loads
// from Redis happen without it; a load is used only if its partition did not change
// state meanwhile. parts.mu orders state changes: ring changes, releases and clean-ups.
package owner
