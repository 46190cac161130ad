// Package lease keeps at most one deciding node per partition: a node decides the
// counters of a partition in memory only while it holds that partition's lease, granted by a
// majority of the voters.
//
// # Grants
//
// Every node is a grantor. Each one keeps, per partition, the holder it last granted
// that partition to and until when (Grantor). A node that owns partitions in its ring
// claims them in a heartbeat to every voter (Request) every Config.Heartbeat; each
// grantor grants a claimed partition when nobody else holds it there, or the holder's
// grant has run out, or the holder dropped it (Request.Drops). The claimant holds partition p
// until L after the send time of the last heartbeat round in which a majority of its
// voters granted p (Holder). Two nodes can therefore hold p at once only if some
// grantor granted p to both within L: it never does. A grantor measures a grant's end
// on its own clock with room for clock drift (Config.Drift) plus Config.Margin, and
// the holder measures from when it sent the heartbeat, before the grant: for leases no
// clocks need to agree, only to run at about the same rate. (The counters' clocks, the
// wall clocks that place ops in buckets, are another matter, and do need to agree
// closely: see docs/guarantees.md, Clocks. Heartbeats carry them so that each node measures its
// peers' against its own, as NTP does (Keeper.ClockOffsets); nothing here decides by
// them.)
//
// A claim refused only because another holder's grant runs here is claimed again in a
// round sent as that grant runs out (Keeper.RetryIn), not at the next heartbeat: the
// other grantors heard the holder's last heartbeat within a network delay of this one.
// A member that exchanged no heartbeat with this node for a lease's length is silent
// (Keeper.Silent): it can renew nothing here, and the ring leaves it (package node)
// whether or not gossip has declared it dead yet, so its partitions move as its grants
// run out.
//
// A holder stops deciding Config.Grace before its lease runs out (Holder.DecideUntil),
// so that it has that long to write its counters' deltas to Redis before any other node
// can be granted the partition. A grantor that starts refuses every grant for one
// grant's length: its earlier run may have granted partitions it no longer remembers.
//
// # Voters
//
// The voters are the members whose grants count (Voters): at most Config.Voters of them
// (Config.TargetVoters), so that what leases cost does not grow with the fleet. Every
// member, voter or not, holds leases granted by the voters and sends its heartbeats to
// them alone; two members that are not voters exchange none, and learn from the voters'
// replies which members went silent (Reply.Silent) and from gossip each other's runs
// (View.Runs). A majority is more than half of the voters, so two sides of a partition can
// never both have one. A member joins the voters while they are fewer than their number,
// when a majority of the voters see it alive (of the zone with the fewest voters first,
// then by name); a voter leaves them when it left gracefully, or when it has been dead
// for Config.DeadVoterAfter and a majority of the other voters see it dead: one change at
// a time, each agreed by a majority, so a minority can neither shrink the voters to make
// itself a majority nor grow them with members only it can see. A founder makes the first
// voters at once, itself and, up to their number, members that told it they have no
// voters (FoundWith): no set came before, so no lease of another set can run. A grant counts only toward a majority of the set its grantor
// holds, and a change waits until a majority of the voters have held the set it starts
// from for a grant's length: by then no lease granted under the set before that one
// runs, and the two sets apart, whose majorities need not meet, are never both in use.
// Which change is made from a set is chosen by ballot, as a single-decree Paxos chooses
// a value, the voters of that set its acceptors (change.go): two nodes that each see
// another change due at one moment (a member leaving, another joining) cannot both make
// one, which would give two sets of one version whose majorities need not meet.
// A grantor refuses every grant to a node that is neither a voter nor a member alive.
//
// Grantor, Holder and Voters are pure state: no I/O, no clock; they are told the time.
// Keeper drives them over an Exchanger: it reads the monotonic clock it is given
// (KeeperConfig.Clock, the one the node's owner runs on: times are time.Duration since
// its start), paces its rounds with time's own ticker and timer, and runs each round's
// exchanges on goroutines. The counters' clock the heartbeats carry is given too
// (KeeperConfig.Wall), so that a simulation gives each node its own; the simulation
// drives the rounds itself (Keeper.Begin, Keeper.Handle, Keeper.Absorb) rather than
// Keeper.Run.
package lease
