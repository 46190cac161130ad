package owner

import (
	"errors"
	"time"
)

// Record is everything this node knows of one partition that decides what it may do
// with it: its State, and the facts beside it that used to live in tables of their own.
// Only Step makes a Record from another (Owner.step); ops read the current one without a
// lock (each is a value that never changes once stored).
type Record struct {
	State State
	// Gen counts the changes of State, and the counters handed in (CountersIn): a load
	// begun in an earlier generation is not used.
	Gen uint64
	// Blind: some of its counters were started from empty memory while Redis was down;
	// their keys are in blindKeys (blind.go). Set before the partition is decided from
	// it again, they are dropped and reloaded.
	Blind bool
	// Due: Redis lost its data since this memory was counted, and this node owes it a
	// write-back in full once it decides the partition (writeback.go).
	Due bool
	// Lapsed: its lease lapsed here since its memory was last dropped or left; another
	// node may have decided it since (cleanDrop).
	Lapsed bool
	// Lend is where some of its counters went: in Lent and LentStale, the node that has
	// not handed them back; in Idle, the node an ended release sent them to, remembered
	// for lentMax (lend.go). None when Lend.to is "".
	Lend lend
	// Fenced: other nodes' write-behind in doubt that its loads wait for, and the
	// counters held until it is reached (fence.go); nil: none.
	Fenced *fenceSet
	// Late is what this node knows of the partition's late-write marks (late.go).
	Late lateMark
	// Fresh is what the load skip knows of Redis's copy of the partition (loadskip.go).
	Fresh freshness
}

// lateMark is what a Record holds of late writes (late.go).
type lateMark struct {
	// Unmarked: this node's write of the partition landed after its lease ended, and
	// its mark is not written yet.
	Unmarked bool
	// Seen is the partition's mark as last read (0: none, or unseen).
	Seen int64
	// Reload: its counters came from another node's memory; the next poll that reaches
	// Redis reloads them as if its mark had moved.
	Reload bool
}

// lend is where a partition's counters went and when (lend.go).
type lend struct {
	to    string        // the node its counters went to last
	since time.Duration // Clock.Since when they went
}

// freshness is what a Record holds for the load skip (loadskip.go redisHoldsNothing). Gens are a
// Record's Gen + 1, so that 0 means never.
type freshness struct {
	// DecidedGen, DecidedSince: when (counters' clock, ms) this node began deciding the
	// partition in generation DecidedGen-1: the first op it decided there.
	DecidedGen   uint64
	DecidedSince int64
	// QuietGen, QuietAt: the partition's stamp (when Redis last got a write of it:
	// fallback.Written), read in generation QuietGen-1 (QuietAt 0: never written).
	QuietGen uint64
	QuietAt  int64
	// Departed counts the writes Redis confirmed of the partition's counters that had
	// left memory (the pending part of a counter dropped to be reloaded, say): Redis then
	// holds what memory does not, and a stamp read before such a write says nothing of
	// it. QuietDeparted is Departed when the stamp was read; DepartedAt (counters'
	// clock, ms) when Redis last confirmed such a write: Redis holds it whatever the
	// stamps say. GainedDeparted is Departed when this node last gained the partition:
	// a Handoff's counter sent from another node's memory lacks what this node wrote
	// of it since (receive.go).
	Departed       uint64
	QuietDeparted  uint64
	DepartedAt     int64
	GainedDeparted uint64
	// BeforeGen, Before: the lowest of the stamps read in generation BeforeGen-1 (0:
	// none). Stamps only rise, so it is no lower than every stamp made before this node
	// began deciding the partition in that generation.
	BeforeGen uint64
	Before    int64
	// Stamped (counters' clock, ms) is when this node last stamped the partition
	// written, in stamp era StampedEra (flusher.era: forgetting every stamp starts a
	// new era).
	StampedEra uint64
	Stamped    int64
}

// verdict is the one rule of which ops are decided here (the simulation checks it never
// lets two nodes decide one partition): what to do with an op on a partition with this
// record, given whether this node holds its lease now, whether Redis answers, and
// whether the ring in use makes this node its owner. blind reports that the partition
// waits for its blind counters to be dropped.
func (r *Record) verdict(holds, redisUp, owns bool) (a action, blind bool) {
	switch r.State {
	case Owned:
		if redisUp && r.Blind {
			// Counters were started here from empty memory while Redis was down: until
			// a clean-up drops and reloads them, memory lacks what Redis has, and a count
			// or allow from it would be short.
			return waitFor, true
		}
		if holds {
			return decideIt, false
		}
		return waitFor, false
	case Stale:
		// Stale memory is dropped and reloaded from Redis; while Redis is down it is
		// the best there is, and is decided from (degraded, see the package doc).
		if !redisUp && holds {
			return decideIt, false
		}
		return waitFor, false
	case Lent, LentStale:
		return waitFor, false
	case Releasing, ReleasingStale:
		if owns {
			// The ring gave it back while its release was under way: the release ends
			// (handed back) once its send in flight is answered, and the op is decided
			// then. Answering it not-owned would send it round to this node again.
			return waitFor, false
		}
	}
	return notMine, false
}

// check reports the first invariant r breaks (nil: none). Step checks every Record it
// makes, so a flaw in the owner's bookkeeping is an error where it happens, in tests,
// the simulation and production alike (UnknownTransitions).
func (r *Record) check() error {
	lent := r.State == Lent || r.State == LentStale
	switch {
	case lent && r.Lend.to == "":
		return errors.New("lent, and to no node")
	case r.Lend.to != "" && !lent && r.State != Idle:
		return errors.New("a lend outside lent and idle")
	case r.State == Idle && (r.Lapsed || r.Due):
		return errors.New("idle, and lapsed or owing a write-back")
	case r.Fenced != nil && len(r.Fenced.fs) == 0:
		return errors.New("fenced by no fence")
	case r.Fresh.DecidedGen > r.Gen+1 || r.Fresh.QuietGen > r.Gen+1 || r.Fresh.BeforeGen > r.Gen+1:
		return errors.New("the load skip knows of a generation still to come")
	}
	return nil
}
