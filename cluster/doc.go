// Package cluster keeps a node's view of the cluster's membership, by gossip
// (github.com/hashicorp/memberlist, pinned at v0.7.0).
//
// Start creates the local member, joins the seeds in the background (retrying with
// backoff until one answers), and then re-joins them every RejoinInterval: memberlist
// forgets a dead node after GossipToTheDeadTime and never contacts it again, so two
// halves of a cluster that were apart longer than that stay apart for good unless
// someone joins across.
//
// A seed may be a DNS name: it stands for every address it resolves to (seeds.go), and
// it is resolved here, again at each join attempt and each re-join, not by memberlist.
// memberlist's Join would resolve it to all its records too, but a name never matches
// the address of a member seen alive, so every re-join would push and pull the whole
// state with every member behind it. Resolved here, the addresses are filtered (this
// member, members seen alive, the other IP family) and only the rest are joined, so
// members that appear in the name later, such as new pods behind a Kubernetes headless
// Service, are found at the next re-join at little cost.
//
// Each member's memberlist metadata carries what peers need to route to it: its RPC
// address, its incarnation (its start time in nanoseconds, so a node restarted under
// the same name is recognisable as a new run that lost its memory) and whether it is
// leaving.
//
// # States
//
// memberlist reports joins, metadata updates and departures, but not suspicion, and
// it says "gone" without saying whether a node left or failed (v0.7.0 keeps the state
// in an unexported field; Node.State is never filled in). So the states here are the
// ones events can tell apart: alive; leaving (the node announced, in its metadata,
// that it is about to leave); left (gone after announcing it was leaving); and dead
// (gone without notice). A suspect node is reported alive until it is declared dead.
//
// # Concurrency
//
// memberlist calls the event delegate while holding its own node lock. The handlers
// here only copy the node and update a table under the Cluster's mutex, and never call
// back into memberlist; no method calls memberlist while holding that mutex. That is
// the whole lock order: memberlist's lock, then ours.
//
// Changes delivers a coalesced "something changed" signal; the receiver then reads
// Members (or Alive) and, typically, rebuilds its ring.
//
// The clustertest package starts in-process clusters for tests; it is ordinary code
// so that tests of higher layers can use it too.
package cluster
