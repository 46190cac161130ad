package owner

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/leaparray"
)

// received is the receiving side's memory of Handoffs applied, so that a Handoff sent
// again (its answer was lost) is applied once; and the sending side's id source.
//
// A sender sends a Handoff in doubt again, with its id, until the receiver answers
// (release.go), however long that takes, so the receiver must know its ids for as long:
// it keeps each sender's last maxAppliedPerSender, not a span of time. A sender sends
// another Handoff to a receiver only once the one before was answered, so an id in
// doubt can be pushed out only by that many later Handoffs applied here, which the
// sender cannot have sent while it waits for an answer to the one in doubt.
type received struct {
	nextID  atomic.Uint64
	applied map[string]*appliedIDs // by sender; under Owner.mu
	refused map[string]*appliedIDs // by sender: refused for good, so that no copy still on its way applies later
	clock   uint64                 // Handoffs answered so far: orders senders by their last
}

type appliedIDs struct {
	ids  map[uint64]struct{}
	ring []uint64 // the ids in the order applied, to forget the oldest
	next int
	last uint64 // received.clock at its last Handoff
}

// Bounds of what the receiver remembers.
const (
	maxAppliedPerSender = 4096
	maxSenders          = 256
)

func (r *received) init(seed uint64) {
	r.applied = map[string]*appliedIDs{}
	r.refused = map[string]*appliedIDs{}
	r.nextID.Store(seed) // unique per run: a restarted sender never reuses an id
}

func seenIn(m map[string]*appliedIDs, from string, id uint64) bool {
	a := m[from]
	if a == nil {
		return false
	}
	_, ok := a.ids[id]
	return ok
}

func (r *received) seen(from string, id uint64) bool {
	return seenIn(r.applied, from, id) && !mutate.On(mutate.ApplyHandoffTwice)
}

// record remembers that from's Handoff id was applied.
func (r *received) record(from string, id uint64) { r.remember(r.applied, from, id) }

// refuse remembers that from's Handoff id was refused: a copy of it still on its way (a
// resend while it was in doubt) is refused too, however things stand when it arrives,
// since its sender took the refusal as the answer and sends its counters in another.
func (r *received) refuse(from string, id uint64) { r.remember(r.refused, from, id) }

// remember records from's id in m, forgetting from's oldest id past
// maxAppliedPerSender, and the least recent sender past maxSenders.
func (r *received) remember(m map[string]*appliedIDs, from string, id uint64) {
	r.clock++
	a := m[from]
	if a == nil {
		if len(m) >= maxSenders {
			forgetLeastRecent(m)
		}
		a = &appliedIDs{ids: map[uint64]struct{}{}}
		m[from] = a
	}
	a.last = r.clock
	if len(a.ring) < maxAppliedPerSender {
		a.ring = append(a.ring, id)
	} else {
		delete(a.ids, a.ring[a.next])
		a.ring[a.next] = id
		a.next = (a.next + 1) % maxAppliedPerSender
	}
	a.ids[id] = struct{}{}
}

func forgetLeastRecent(m map[string]*appliedIDs) {
	var name string
	var oldest uint64
	for n, a := range m {
		if name == "" || a.last < oldest || a.last == oldest && n < name {
			name, oldest = n, a.last
		}
	}
	delete(m, name)
}

// Handoff applies a Handoff from a node that hands counters on to this one: it takes
// them into memory (with Redis, with their part not yet in Redis to write behind). It
// refuses, applying nothing, when a counter's partition is not this node's in its ring
// (ErrHandoffNotOwner: the sender sends it where it belongs). A Handoff already
// applied is acknowledged and not applied again; one meant for another run of this node
// is refused. The partitions it names were released
// by the sender, so this node asks for their leases at once, and those it had lent to
// the sender are decided again.
func (o *Owner) Handoff(_ context.Context, h *Handoff) error {
	if h.ToRun != 0 && o.cfg.Incarnation != 0 && h.ToRun != o.cfg.Incarnation {
		// Meant for an earlier run of this node: whether that one applied it is gone
		// with it, and its ID means nothing here. Certainly not applied here.
		return fmt.Errorf("%w: meant for run %d of %s, this is run %d", ErrHandoffOtherRun, h.ToRun, o.cfg.Self, o.cfg.Incarnation)
	}
	var err error
	o.do(func() { err = o.receive(h) })
	return err
}

// receive is Handoff's step. The caller holds mu.
func (o *Owner) receive(h *Handoff) error {
	if o.recv.seen(h.From, h.ID) {
		return nil
	}
	if seenIn(o.recv.refused, h.From, h.ID) {
		return fmt.Errorf("%w: handoff %d was refused before", ErrHandoffNotOwner, h.ID)
	}
	if len(h.Counters) > 0 {
		if err := o.takeIn(h); err != nil {
			o.recv.refuse(h.From, h.ID)
			return err
		}
	}
	o.recv.record(h.From, h.ID)
	if len(h.Partitions) > 0 {
		if o.returned(h.From, h.Partitions) {
			o.wakeAfter()
		}
		o.ask(o.cfg.Leases.Kick)
	}
	return nil
}

// Leave tells the owner that this node is leaving gracefully: from now on it takes no
// counters in but its own coming back. Its ring still names it for a moment (until
// gossip's news of the leave reaches its own membership), and counters handed to it
// then would leave the sender's memory for a node about to stop: should the ring give
// their partition back to the sender meanwhile, the sender would decide it from empty
// memory while they sit here (TestLeavingNodeTakesNoCountersIn). Refused, they stay
// with the sender, which hands them on once its ring drops this node.
func (o *Owner) Leave() {
	o.do(func() { o.selfLeaving = true })
}

// takeIn installs a Handoff's counters, all or none, while no partition changes state.
// The caller holds mu.
func (o *Owner) takeIn(h *Handoff) error {
	o.decide.RLock()
	defer o.decide.RUnlock()
	rg := o.ring.Load()
	if rg == nil {
		return fmt.Errorf("%w: this node has no ring yet", ErrHandoffNotOwner)
	}
	specs := make([]leaparray.Spec, len(h.Counters))
	for i := range h.Counters {
		p := rg.Partition(h.Counters[i].Key)
		switch st := o.parts.get(p); {
		case st != Owned && st != Stale && st != Lent && st != LentStale:
			return fmt.Errorf("%w: partition %d is not this node's", ErrHandoffNotOwner, p)
		case o.selfLeaving && (st == Owned || st == Stale):
			// Its own counters coming back (Lent) it takes, to hand them on whole.
			return fmt.Errorf("%w: this node is leaving (partition %d)", ErrHandoffNotOwner, p)
		}
		specs[i] = h.Counters[i].Spec
	}
	// Handed-over counters are taken past the store's bounds, which a client's new
	// counters respect, but not past twice them: the sender keeps what is refused and
	// sends it again, so nothing is lost while it runs.
	if err := o.cfg.Store.Admits(specs); err != nil {
		o.cfg.Logger.Warn("handoff refused: memory holds twice its bound; the sender keeps the counters and tries again",
			"from", h.From, "counters", len(h.Counters), "err", err)
		return fmt.Errorf("%w: this node is full: %v", ErrHandoffRefused, err)
	}
	if o.cfg.Redis == nil {
		for i := range h.Counters {
			o.installCounter(&h.Counters[i], handedIn)
		}
		return nil
	}
	ps := append([]int(nil), h.Partitions...)
	for i := range h.Counters {
		if p := rg.Partition(h.Counters[i].Key); !containsInt(ps, p) {
			ps = append(ps, p)
		}
	}
	// A load of these partitions under way read Redis before the Handoff's pending parts,
	// and the writes its fences stand for, could be there: a new generation, taken
	// before the counters go in, voids it (install) and its op goes again, to load once
	// those are settled.
	for _, p := range ps {
		o.step(p, on(CountersIn))
	}
	how := handedIn
	if o.cfg.Redis.Healthy() && h.RedisEpoch != "" && (h.RedisEpoch == o.flush.epoch || o.flush.epoch == "" && o.redisEpoch.losses == 0) {
		how = handedInRedisHas
	}
	for i := range h.Counters {
		o.installCounter(&h.Counters[i], how)
	}
	for _, p := range ps {
		o.step(p, on(Installed)) // memory came from elsewhere: no load skip for a window (loadskip.go)
	}
	o.addFences(ps, h.Fences, o.cfg.Clock.Since())
	for _, c := range h.Counters {
		if len(h.Fences) > 0 && len(c.Buckets) > 0 && !o.cfg.Store.Has(c.Key, c.Spec) {
			o.holdFenced(rg.Partition(c.Key), c) // loads from Redis (fence.go)
		}
	}
	o.forgetLate(ps)
	if how != handedInRedisHas {
		o.reloadWhenBack(ps)
	}
	o.tookInRedisEpoch(h.RedisEpoch, ps)
	return nil
}

// arrival is how a counter comes into memory whole (installCounter).
type arrival uint8

const (
	// handedIn: from another node.
	handedIn arrival = iota
	// handedInRedisHas: from another node, and Redis answers and holds the sender's
	// epoch (it has the sender's writes).
	handedInRedisHas
	// takenBack: this node's own, from a release the ring undid before it was handed
	// on: as it left memory.
	takenBack
)

// installCounter takes a counter into memory. Without Redis its buckets are added (each
// node's memory is what it counted; the sum is the count). With Redis, its pending part
// is written behind, and a counter already in memory was loaded from Redis, which has
// all but that part, so only that is added. One handed in that is not in memory loads
// from Redis on first use, once the pending part is confirmed, when Redis has the
// sender's writes (handedInRedisHas): the sender's counts are only as new as its last
// decision, and this node may have written newer ones since, in an earlier turn as
// owner (a Handoff of 58 delivered after the receiver had written 64 and dropped
// its memory; TestHandedCounterLacksThisNodesDepartedWrites). Otherwise it is created from the state it arrived with, the best
// there is; one taken back always is (this node's writes in doubt of it are its own,
// and were in it).
func (o *Owner) installCounter(c *HandoffCounter, how arrival) {
	st := o.cfg.Store
	if o.cfg.Redis == nil {
		st.Merge(c.Key, c.Spec, c.Buckets)
		return
	}
	if !st.Has(c.Key, c.Spec) {
		buckets := c.Buckets
		if how == handedInRedisHas {
			buckets = nil
		} else if rg := o.ring.Load(); how == handedIn && rg != nil {
			f := &o.parts.at(rg.Partition(c.Key)).Fresh
			if f.Departed != f.GainedDeparted || o.flush.unsettledRef(c.Key, c.Spec) {
				// This node has decided the partition since it gained it (the sender's
				// lease ran out first, or never came), and Redis has, or will have,
				// writes of it that left this memory: the sender's counts lack them. Its
				// pending part is written; the rest loads from Redis once all that is
				// confirmed.
				buckets = nil
			}
		}
		st.Seed(c.Key, c.Spec, buckets)
		if !st.Has(c.Key, c.Spec) {
			// Nothing left in its window: only what it owes Redis (a reset) remains.
			if c.Reset || len(c.Pending) > 0 {
				o.flush.enqueue([]fallback.Delta{{Key: c.Key, Spec: c.Spec, Buckets: c.Pending, Reset: c.Reset}})
			}
			return
		}
	} else {
		st.Merge(c.Key, c.Spec, c.Pending)
		if c.Reset && o.countedBlind(c.Key) {
			o.resetBehind(c)
			return
		}
	}
	st.AddPending(c.Key, c.Spec, c.Pending, c.Reset)
}

// countedBlind reports whether this node holds key as a counter it started from empty
// memory while Redis was down, listed by name: its memory is what this node counted.
func (o *Owner) countedBlind(key string) bool {
	rg := o.ring.Load()
	if rg == nil {
		return false
	}
	p := rg.Partition(key)
	return o.parts.at(p).Blind && o.blind.listed(p, key)
}

// resetBehind takes in c, a counter handed in with a reset, into a counter this node
// counted blind: the sender reset it before this node counted any of it (its lease
// ended before this node's began), but this node's deltas of it may be on their way to
// Redis already, and the reset written after them would erase them
// (TestHandedResetErasesNothingCountedBlindSince). So
// memory, which after that reset is all there is, goes behind them as a base instead
// (a reset followed by its state), its pending part after it as usual.
func (o *Owner) resetBehind(c *HandoffCounter) {
	st := o.cfg.Store
	st.AddPending(c.Key, c.Spec, c.Pending, false)
	o.flush.enqueue([]fallback.Delta{{Key: c.Key, Spec: c.Spec, Buckets: st.Base(c.Key, c.Spec), Reset: true, Base: true}})
}
