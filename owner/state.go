package owner

import (
	"errors"
	"fmt"
	"time"
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

// Kind is what happens to a partition. The kinds up to GainedLent may move its State
// (Step's table); those after it note a fact in its Record and leave the State as it is.
type Kind uint8

const (
	// Gained: the ring gives the partition to this node.
	Gained Kind = iota
	// Lost: the ring gives it to another node.
	Lost
	// Lapsed: its lease ran out while this node held it.
	Lapsed
	// LateWrite: another node's write to Redis of its counters landed after that node's
	// lease ended (a late-write mark moved).
	LateWrite
	// Reloaded: its stale memory left; its counters load from Redis on first use.
	Reloaded
	// Released: a release put its counters where the new owner finds them, and the ring
	// does not give it back.
	Released
	// Reclaimed: a release ended with the ring giving it back, every counter here.
	Reclaimed
	// ReclaimedLent: a release ended with the ring giving it back, some counters at
	// another node.
	ReclaimedLent
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

	// Blinded: a counter of the partition was started from empty memory while Redis
	// was down (blind.go).
	Blinded
	// CountersIn: counters handed over are about to go into memory: a load under way
	// read Redis before them, and is not used (a new generation).
	CountersIn
	// Installed: counters handed over went into memory: it came from elsewhere, so
	// nothing known of it skips a load (loadskip.go).
	Installed
	// RedisLost: Redis lost its data since this memory was counted: a write-back in
	// full is due (writeback.go).
	RedisLost
	// WroteBack: the write-back in full is under way, or nothing is left to write.
	WroteBack
	// Dropped: its stale memory is dropped, to be reloaded: nothing of it is owed to
	// Redis, nor started blind, any more.
	Dropped
	// Decided: an op was decided on it (Event.Ms: when, counters' clock).
	Decided
	// StampRead: its stamp was read from Redis (Event.Ms; Event.Gen: the generation it
	// was read for; Event.Count: Departed as it was read).
	StampRead
	// Departed: Redis confirmed a write of its counters that had left memory
	// (Event.Ms: dated by its newest bucket when later than the clock).
	Departed
	// Stamped: this node stamped it written (Event.Ms, in stamp era Event.Gen).
	Stamped
	// FencesIn: counters came with fences (Event.Fences, at Event.At: fence.go).
	FencesIn
	// FenceHeld: a counter that came under its fences is held beside them
	// (Event.Counter), unless it has none.
	FenceHeld
	// FencesReached: Redis shows its fences reached (Event.Count: how many were asked
	// of; more came meanwhile, it keeps them all).
	FencesReached
	// FencesGone: the fences Event.Fences are dropped (their writers' runs are over).
	FencesGone
	// FencesDropped: all its fences are dropped (handed on, expired, or Redis lost its
	// data).
	FencesDropped
	// LateWritten: a write of this node's landed after its lease ended: its late mark
	// is to be written (late.go).
	LateWritten
	// LateMarked: that mark is written.
	LateMarked
	// MarkRead: its late mark read from Redis is Event.Ms (0: none).
	MarkRead
	// MarkForgotten: its counters came from another node's memory: its mark counts as
	// unseen.
	MarkForgotten
	// ReloadWhenBack: the next poll of the marks that reaches Redis reloads it.
	ReloadWhenBack
	// ReloadTaken: that poll came.
	ReloadTaken
)

var kindNames = [...]string{Gained: "gained", Lost: "lost", Lapsed: "lapsed", LateWrite: "late-write",
	Reloaded: "reloaded", Released: "released", Reclaimed: "reclaimed", ReclaimedLent: "reclaimed-lent",
	CountersBack: "counters-back", LendEnded: "lend-ended", RedisBack: "redis-back", GainedLent: "gained-lent",
	Blinded: "blinded", CountersIn: "counters-in", Installed: "installed", RedisLost: "redis-lost",
	WroteBack: "wrote-back", Dropped: "dropped", Decided: "decided", StampRead: "stamp-read",
	Departed: "departed", Stamped: "stamped", FencesIn: "fences-in", FenceHeld: "fence-held",
	FencesReached: "fences-reached", FencesGone: "fences-gone", FencesDropped: "fences-dropped",
	LateWritten: "late-written", LateMarked: "late-marked", MarkRead: "mark-read",
	MarkForgotten: "mark-forgotten", ReloadWhenBack: "reload-when-back", ReloadTaken: "reload-taken"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is what happens to a partition: its Kind, and what the kinds that carry more
// say.
type Event struct {
	Kind Kind
	// Lend, for Released and ReclaimedLent: where some of the partition's counters
	// went, and when (none: Lend.to is "").
	Lend lend
	// Ms, Gen, Count, At, Fences, Counter: as the Kind says.
	Ms      int64
	Gen     uint64
	Count   uint64
	At      time.Duration
	Fences  []HandoffFence
	Counter *HandoffCounter
}

// on is the Event of kind k that carries nothing more.
func on(k Kind) Event { return Event{Kind: k} }

func (e Event) String() string { return e.Kind.String() }

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

// ErrBrokenRecord is Step's error for an event that would make a Record break one of
// its invariants (Record.check): a flaw too, counted as ErrUnknownTransition is, the
// Record kept.
var ErrBrokenRecord = errors.New("owner: event would break the partition record")

// Step is the partition state machine: the Record event e makes of r, and the action
// it calls for. It is pure: no I/O, no clock, no locks; Owner.step stores what it
// returns, and nothing else changes a Record.
//
// The State moves by stateStep's table. Besides it:
//   - a change of State starts a new generation (Gen); so does counters-in;
//   - lapsed marks a claimed partition Lapsed (with Redis); lost (to releasing) clears
//     Blind, Due and Lend; idle clears Lapsed and Due; redis-back clears Blind; gained (from idle)
//     clears Lend and notes Fresh.GainedDeparted; gained-lent keeps Lend (where an ended
//     release sent the counters) as the lend it waits for; released and reclaimed-lent
//     set Lend from the event, reclaimed, counters-back and lend-ended clear it;
//   - the kinds after gained-lent note a fact and move no State: blinded sets Blind,
//     redis-lost sets Due (but in idle), wrote-back clears it, dropped clears Due, Lapsed
//     and Blind, installed forgets what the load skip knew, and decided, stamp-read,
//     departed and stamped note what it knows (loadskip.go); the fences- and fence- kinds
//     change Fenced (fence.go), the late-, mark- and reload- kinds Late (late.go).
//
// An error leaves r as it is: ErrUnknownTransition for a pair the table does not know,
// ErrBrokenRecord for an event that would make a Record that breaks its invariants
// (Record.check).
func Step(r Record, e Event, persistent bool) (Record, Action, error) {
	next, act, err := step(r, e, persistent)
	if err != nil {
		return r, 0, err
	}
	if err := next.check(); err != nil {
		return r, 0, fmt.Errorf("%w: %v in %v: %w", ErrBrokenRecord, e.Kind, r.State, err)
	}
	return next, act, nil
}

// step is Step before the check of what it makes.
func step(r Record, e Event, persistent bool) (Record, Action, error) {
	if e.Kind > ReloadTaken {
		return r, 0, fmt.Errorf("%w: %v in %v", ErrUnknownTransition, e.Kind, r.State)
	}
	if e.Kind > GainedLent {
		return note(r, e), 0, nil
	}
	next, act, err := stateStep(r.State, e.Kind, persistent)
	if err != nil {
		return r, 0, err
	}
	out := r
	if e.Kind == Lapsed && persistent && r.State.Claimed() {
		out.Lapsed = true
	}
	if next == r.State {
		return out, 0, nil
	}
	out.State = next
	out.Gen++
	switch {
	case next.Releasing() && !r.State.Releasing():
		out.Blind, out.Due, out.Lend = false, false, lend{}
	case next == Idle: // nothing of it is left here
		out.Lapsed, out.Due, out.Lend = false, false, e.Lend
	case e.Kind == RedisBack:
		out.Blind = false
	case e.Kind == Gained:
		out.Lend = lend{}
		out.Fresh.GainedDeparted = r.Fresh.Departed
	case e.Kind == ReclaimedLent:
		out.Lend = e.Lend
	case e.Kind == Reclaimed || e.Kind == CountersBack || e.Kind == LendEnded:
		out.Lend = lend{}
	}
	return out, act, nil
}

// note is Step for the kinds that move no State.
func note(r Record, e Event) Record {
	f := &r.Fresh
	switch e.Kind {
	case Blinded:
		r.Blind = true
	case CountersIn:
		r.Gen++
	case Installed:
		f.DecidedGen, f.QuietGen = 0, 0
	case RedisLost:
		r.Due = r.State != Idle
	case WroteBack:
		r.Due = false
	case Dropped:
		r.Due, r.Lapsed, r.Blind = false, false, false
	case Decided:
		if f.DecidedGen != r.Gen+1 {
			f.DecidedGen, f.DecidedSince = r.Gen+1, e.Ms
		}
	case StampRead:
		g := e.Gen + 1
		if f.BeforeGen != g || e.Ms < f.Before {
			f.BeforeGen, f.Before = g, e.Ms
		}
		f.QuietGen, f.QuietAt, f.QuietDeparted = g, e.Ms, e.Count
	case Departed:
		f.DepartedAt = e.Ms
		f.Departed++
	case Stamped:
		f.StampedEra, f.Stamped = e.Gen, e.Ms
	case FencesIn:
		r.Fenced = r.Fenced.withFences(e.Fences, e.At)
	case FenceHeld:
		if r.Fenced != nil {
			r.Fenced = r.Fenced.holding(*e.Counter)
		}
	case FencesReached:
		if r.Fenced != nil && uint64(len(r.Fenced.fs)) == e.Count {
			r.Fenced = nil
		}
	case FencesGone:
		if r.Fenced != nil {
			r.Fenced = r.Fenced.without(e.Fences)
		}
	case FencesDropped:
		r.Fenced = nil
	default:
		r.Late = noteLate(r.Late, e)
	}
	return r
}

// noteLate is note for the kinds of late marks.
func noteLate(l lateMark, e Event) lateMark {
	switch e.Kind {
	case LateWritten:
		l.Unmarked = true
	case LateMarked:
		l.Unmarked = false
	case MarkRead:
		l.Seen = e.Ms
	case MarkForgotten:
		l.Seen = 0
	case ReloadWhenBack:
		l.Reload = true
	case ReloadTaken:
		l.Reload = false
	}
	return l
}

// stateStep is the State table, what a kind of event does to a partition in state s.
// persistent says whether the owner has Redis behind its memory: without it a lapsed
// partition's memory is what this node counted, and stays (whoever decided meanwhile
// hands its counts back to be added). A pair the table below lists moves as it says;
// a pair it names unchanged leaves the state as it is; any other pair is
// ErrUnknownTransition (the state stays).
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
//	releasing       released         → idle
//	releasing       reclaimed        → owned
//	releasing       reclaimed-lent   → lent
//	releasing-stale released         → idle
//	releasing-stale reclaimed        → stale           reload
//	releasing-stale reclaimed-lent   → lent-stale
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
func stateStep(s State, e Kind, persistent bool) (next State, act Action, err error) {
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
	case s == Releasing && e == Released:
		return Idle, 0, nil
	case s == Releasing && e == Reclaimed:
		return Owned, 0, nil
	case s == Releasing && e == ReclaimedLent:
		return Lent, 0, nil
	case s == ReleasingStale && e == Released:
		return Idle, 0, nil
	case s == ReleasingStale && e == Reclaimed:
		return Stale, Reload, nil
	case s == ReleasingStale && e == ReclaimedLent:
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
func unchanged(s State, e Kind, persistent bool) bool {
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
