// Package owner is the owner's side of counters: it decides the ops of the partitions
// this node holds, keeps them in Redis behind its memory, and hands them on when the
// ring moves them to another node.
//
// # One state machine
//
// Each partition has, on this node, one Record: its State (Idle, Owned, Stale,
// Releasing, ReleasingStale, Lent, LentStale) and every fact beside it that decides
// what the partition may do (counters started blind, a write-back owed since Redis lost
// its data, a lapse since its memory was last dropped, where lent counters are, fences,
// late marks, what the load skip knows). A Record changes only through Step: a Record
// and an Event in, the next Record and an Action out, with no I/O, clock or lock, so
// that it is tested by table and by the cluster simulation (package sim). Step's doc
// holds the transition table; an event it does not expect, or one that would make a
// Record break its invariants (Record.check), is an error, counted and logged. Records
// are values stored whole (parts.go), so ops read one without a lock, and which ops are
// decided here is a function of the Record alone (Record.verdict). Everything else in
// the package is what drives it (ring changes, lapses, late-write marks, the outcomes
// of Redis and rpc calls) and what carries out its actions (releases, reloads).
//
// The owner does no I/O of its own and never waits on it: it asks Config.Redis,
// Config.Peers and Config.Clock, whose calls return at once and whose answers come
// back through callbacks (io.go). In production those run on goroutines (RedisIO,
// PeersIO, clock.Real); in a simulation they are events of one seeded scheduler, so a
// seed replays exactly.
//
// Work on partitions is done in steps (drive.go), one at a time under Owner.mu, driven
// by one goroutine at a time: a step asks for its calls and for a wake of parked ops,
// and they are carried out once it let mu go. A call's outcome is posted as the next
// step, and the goroutine it came on returns at once when another drives.
//
// # One decider per partition
//
// A node decides a partition's counters only while the partition is Owned (the ring
// makes it the owner, and its memory is current) and it holds the partition's lease
// (package lease): a majority of the voters granted it, which they do to one node at a
// time. A partition the ring gives this node is claimed at once; its ops wait (at most
// Config.HandoffWait) for the grant. A partition the ring takes away stops being decided
// at once, and stays claimed until its counts are where the new owner will look for
// them, so the new owner cannot be granted it before. Ops this node does not decide are
// answered counter.ErrNotOwner: certainly not applied, so the router sends them on.
//
// # Persistence (with Redis)
//
// Redis holds every counter's truth but the deltas owners have not written yet. Every
// FlushInterval the owner drains what its counters gained (resets included, in order)
// and writes it in batches whose script calls apply at most once however often they are
// sent (fallback.Batch): a call whose answer was lost is sent again with its sequence
// number, which Redis remembers per writer. Batches go strictly in order, and nothing
// newer is sent while one is unconfirmed, so an outage keeps the deltas in memory (one
// per counter and bucket, not per op) until Redis answers again. A node killed with
// SIGKILL loses what it had not written: with Redis slow or down, everything since its
// last confirmed write.
//
// A counter that is not in memory is loaded from Redis on first use, unless this node
// has deltas of it not yet confirmed there (then the load waits for them, at most
// settleWait), or Redis can hold nothing of it in its window (loadskip.go: no load). That
// is judged by this node's counters' clock (Config.Now) against partition stamps and
// buckets placed by the writers' own clocks, so it holds however far apart the nodes'
// clocks are; still, no load is skipped while this node does not know its clock to be
// within freshMargin of Redis's, which it measures NTP-style against Redis's TIME once a
// second (clock.go: RedisClock). A load
// is used only if its partition did not change state and no counter was reset while it
// was under way (leaparray.Store.TrySeed). While Redis is down such counters are decided
// from empty memory ("blind"); when Redis is back those counters are dropped and
// reloaded (after their deltas are written), so memory and Redis agree again (blind.go).
//
// # Handing on
//
// When the ring moves a partition away (Releasing), its counters leave memory. With
// Redis their deltas are written, and once Redis confirms them the partition is
// released: the new owner loads each counter from Redis on first use. Without Redis, or
// when Redis does not confirm within persistWait, the counters themselves go to the new
// owner in Handoffs (cut by bytes), each with the part of it not yet in Redis, which the
// new owner then writes behind (while Redis answers it at the sender's epoch, the rest
// it loads from Redis once that part is confirmed: it may hold newer counts than the
// sender's); a Handoff is applied once (by ID), refused by a node
// that does not own its partitions (sent again where the ring says, as it changes), and
// a counter leaves this node only once a Handoff carrying it was applied. A Handoff
// whose answer was lost goes again, with its ID, to the same node, until it answers. A
// write-behind call of them in doubt (sent as Redis went away) stays with the sender,
// which sends it again; it travels as a fence, and the receiver reads none of those
// partitions back from Redis until Redis shows it applied (fence.go). A partition the
// ring gives back before its counters came back is Lent: not decided until the node
// they went to hands them back (lend.go).
//
// Handed-over counters enter memory past the store's bounds (which the counters clients
// create, and those loaded from Redis, respect): refusing them would lose their counts.
// A Handoff that would take the store past twice its bounds is refused, and its sender
// keeps the counters and sends them again until there is room.
//
// # Lapses and late writes
//
// A lease that runs out while held (heartbeats failed: a pause, a partition) means
// another node may decide the partition meanwhile. With Redis the partition goes Stale:
// its memory is dropped, its deltas written, and it is reloaded before it is decided
// again (while Redis is down, memory is the best there is and is used). Without Redis
// memory is what this node counted; whoever decided meanwhile hands its own counts back
// when the partition returns, and they add up. A lapsed node writes its deltas when
// Redis lets it, possibly after the partition's next owner loaded its counters; such a
// write is marked in Redis once confirmed, and whoever holds the partition reloads it
// (late.go).
//
// # Locks
//
// Owner.mu orders everything that changes partitions: ring changes, lapses, ticks,
// received Handoffs and the answers of Redis and rpc calls, each a step taken by the
// driver (drive.go); no call is made and no op's completion runs under it. Ops never
// take it. decide is
// held shared while a batch of ops is judged and decided, and exclusively while
// partitions change state (no I/O, no scan under it): once a partition stops being
// decided no op is still being decided on it, so its counters can leave memory without
// losing an add, shard by shard, while every other partition keeps being decided. Ops
// that must wait (for a grant, a reload, lent counters) wait under their partition and
// are tried again when it changes (waiting.go), never holding a goroutine.
//
// The order in which the owner's locks (and the lease keeper's) are taken is written
// once, as ranks, in package internal/lockrank; make test checks every acquisition
// against it.
package owner
