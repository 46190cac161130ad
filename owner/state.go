package owner

import (
	"errors"
	"fmt"
)

// State is what a partition is on this node. Only Owned partitions are decided here,
// and only while this node holds their lease (a Stale one too while Redis is down: its
// memory is then the best there is).
type State uint8

const (
	// Idle: not this node's, and nothing of it is here.
	Idle State = iota
	// Owned: this node's in its ring; claimed, and decided while the lease holds.
	Owned
	// Stale: this node's, but its memory may lack what another node decided (its lease
	// lapsed, or another node's late write landed): dropped and reloaded from Redis
	// before it is decided again.
	Stale
	// Releasing: no longer this node's; its counters are on their way to where the new
	// owner finds them (Redis, or the new owner itself). Still claimed, never decided.
	Releasing
	// Lent: this node's again, but some of its counters went to another node that has
	// not handed them back. Claimed, never decided until they are back.
	Lent
	// LentStale: Lent, and its memory went stale meanwhile: reloaded once the counters
	// are back.
	LentStale
	// ReleasingStale: Releasing, and its lease lapsed (or another node's late write
	// landed) meanwhile: another node may have decided its counters since, so what is
	// left of them here is only what Redis has not confirmed (their pending part); they
	// go on as that alone, and are reloaded should the ring give the partition back.
	ReleasingStale
)

var stateNames = [...]string{Idle: "idle", Owned: "owned", Stale: "stale", Releasing: "releasing", Lent: "lent",
	LentStale: "lent-stale", ReleasingStale: "releasing-stale"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Event is what happens to a partition.
type Event uint8

const (
	// Gained: the ring gives the partition to this node.
	Gained Event = iota
	// Lost: the ring gives it to another node.
	Lost
	// Lapsed: its lease ran out while this node held it.
	Lapsed
	// LateWrite: another node's write to Redis of its counters landed after that node's
	// lease ended (a late-write mark moved).
	LateWrite
	// Reloaded: its stale memory left; its counters load from Redis on first use.
	Reloaded
	// HandedOn: a release put its counters where the new owner finds them, and the ring
	// does not give it back.
	HandedOn
	// HandedBack: a release ended with the ring giving it back, every counter here.
	HandedBack
	// HandedBackLent: a release ended with the ring giving it back, some counters at
	// another node.
	HandedBackLent
	// CountersBack: the node its counters were lent to handed them back.
	CountersBack
	// LendEnded: the node its counters were lent to left the ring, or did not hand them
	// back in time: it is decided from what is here, and the counters add up when they
	// come.
	LendEnded
	// RedisBack: Redis answers again, and some of the partition's counters were started
	// from empty memory while it was down (blind.go): they are reloaded.
	RedisBack
	// GainedLent: the ring gives the partition to this node, which handed its counters
	// to another node lately (a release that ended) that has not handed them back: it
	// waits for them as for a lend (lend.go).
	GainedLent
)

var eventNames = [...]string{Gained: "gained", Lost: "lost", Lapsed: "lapsed", LateWrite: "late-write",
	Reloaded: "reloaded", HandedOn: "handed-on", HandedBack: "handed-back", HandedBackLent: "handed-back-lent",
	CountersBack: "counters-back", LendEnded: "lend-ended", RedisBack: "redis-back", GainedLent: "gained-lent"}

func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", uint8(e))
}

// Action is what the owner must do after a transition, besides keeping the new state.
type Action uint8

const (
	// Release: hand the partition's counters on (it was just lost).
	Release Action = 1 << iota
	// Reload: drop the partition's memory and load its counters again from Redis.
	Reload
)

// ErrUnknownTransition is Step's error for an event its table does not expect in the
// state: a flaw in the owner's bookkeeping, not a client's. The owner counts it
// (UnknownTransitions, leapcount_partition_unknown_transitions_total) and keeps the
// state; its tests and the simulation fail on it.
var ErrUnknownTransition = errors.New("owner: event unknown in this state")

// Step is the partition state machine: what event e does to a partition in state s.
// persistent says whether the owner has Redis behind its memory: without it a lapsed
// partition's memory is what this node counted, and stays (whoever decided meanwhile
// hands its counts back to be added). A pair the table below lists moves as it says;
// a pair it names unchanged leaves the state as it is; any other pair is
// ErrUnknownTransition (the state stays). It is pure: no I/O, no clock, no locks.
//
//	state           event            → state           action
//	idle            gained           → owned
//	idle            gained-lent      → lent
//	owned           lost             → releasing       release
//	stale           lost             → releasing       release
//	lent            lost             → releasing       release
//	lent-stale      lost             → releasing       release
//	owned           lapsed           → stale           reload  (with Redis)
//	owned           late-write       → stale           reload
//	owned           redis-back       → stale           reload
//	lent            lapsed           → lent-stale              (with Redis)
//	lent            late-write       → lent-stale
//	releasing       lapsed           → releasing-stale         (with Redis)
//	releasing       late-write       → releasing-stale
//	stale           reloaded         → owned
//	releasing       handed-on        → idle
//	releasing       handed-back      → owned
//	releasing       handed-back-lent → lent
//	releasing-stale handed-on        → idle
//	releasing-stale handed-back      → stale           reload
//	releasing-stale handed-back-lent → lent-stale
//	lent            counters-back    → owned
//	lent            lend-ended       → owned
//	lent-stale      counters-back    → stale           reload
//	lent-stale      lend-ended       → stale           reload
//
// Unchanged, as every ring change, lapse and late mark names every partition it
// concerns whatever its state:
//
//	any but idle                       gained, gained-lent  (this node's already)
//	idle, releasing, releasing-stale   lost                 (not this node's, or leaving)
//	idle, stale, lent-stale,           lapsed, late-write   (nothing here, or stale already)
//	releasing-stale
//	owned, lent, releasing             lapsed               (without Redis: memory stays)
func Step(s State, e Event, persistent bool) (next State, act Action, err error) {
	stales := e == LateWrite || e == Lapsed && persistent
	switch {
	case s == Idle && e == Gained:
		return Owned, 0, nil
	case s == Idle && e == GainedLent:
		return Lent, 0, nil
	case s != Idle && !s.Releasing() && e == Lost:
		return Releasing, Release, nil
	case s == Owned && (stales || e == RedisBack):
		return Stale, Reload, nil
	case s == Lent && stales:
		return LentStale, 0, nil
	case s == Releasing && stales:
		return ReleasingStale, 0, nil
	case s == Stale && e == Reloaded:
		return Owned, 0, nil
	case s == Releasing && e == HandedOn:
		return Idle, 0, nil
	case s == Releasing && e == HandedBack:
		return Owned, 0, nil
	case s == Releasing && e == HandedBackLent:
		return Lent, 0, nil
	case s == ReleasingStale && e == HandedOn:
		return Idle, 0, nil
	case s == ReleasingStale && e == HandedBack:
		return Stale, Reload, nil
	case s == ReleasingStale && e == HandedBackLent:
		return LentStale, 0, nil
	case s == Lent && (e == CountersBack || e == LendEnded):
		return Owned, 0, nil
	case s == LentStale && (e == CountersBack || e == LendEnded):
		return Stale, Reload, nil
	case unchanged(s, e, persistent):
		return s, 0, nil
	}
	return s, 0, fmt.Errorf("%w: %v in %v", ErrUnknownTransition, e, s)
}

// unchanged reports whether e leaves s as it is by Step's table.
func unchanged(s State, e Event, persistent bool) bool {
	switch e {
	case Gained, GainedLent:
		return s != Idle
	case Lost:
		return s == Idle || s.Releasing()
	case Lapsed, LateWrite:
		if s == Idle || s == Stale || s == LentStale || s == ReleasingStale {
			return true
		}
		return e == Lapsed && !persistent && (s == Owned || s == Lent || s == Releasing)
	}
	return false
}

// Claimed reports whether a partition in state s is claimed: nobody else may be
// granted it, either because this node decides it or because its counters are still
// on their way.
func (s State) Claimed() bool { return s != Idle }

// waitsForLease reports whether a partition in state s is this node's, to decide once
// it holds its lease (or its counters are back): not idle, not being handed on.
func (s State) waitsForLease() bool { return s != Idle && !s.Releasing() }

// Releasing reports whether a partition in state s is being handed on.
func (s State) Releasing() bool { return s == Releasing || s == ReleasingStale }
