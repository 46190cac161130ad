package owner

import (
	"sync/atomic"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// parts holds each partition's Record. Records change only through step, under
// Owner.mu (but for the notes ops and Redis's answers make: Blinded, Decided, StampRead)
// and, for the changes that stop or start decisions, under Owner.decide held
// exclusively; ops read them without a lock.
type parts struct {
	// tab is the table of Records, made once, by the first ring: behind an atomic
	// pointer because figures (Unwritten) read it without Owner.mu, and may do so
	// before the first ring.
	tab atomic.Pointer[[]atomic.Pointer[Record]]
}

// rec is the table of Records (empty before the first ring).
func (ps *parts) rec() []atomic.Pointer[Record] {
	if t := ps.tab.Load(); t != nil {
		return *t
	}
	return nil
}

// idleRecord is every partition's first Record: Step never stores into one, it makes
// another.
var idleRecord = &Record{}

func (ps *parts) size(n int) {
	if ps.tab.Load() == nil {
		t := make([]atomic.Pointer[Record], n)
		for p := range t {
			t[p].Store(idleRecord)
		}
		ps.tab.Store(&t)
	}
}

// count is how many partitions there are (0 before the first ring).
func (ps *parts) count() int { return len(ps.rec()) }

// at is partition p's Record now (an idle one for p out of range).
func (ps *parts) at(p int) *Record {
	t := ps.rec()
	if p < 0 || p >= len(t) {
		return idleRecord
	}
	return t[p].Load()
}

func (ps *parts) get(p int) State { return ps.at(p).State }

// step applies e to partition p's Record (Step), stores the Record it makes and returns
// the action it calls for. The caller holds Owner.mu, and Owner.decide exclusively
// whenever the step may stop or start decisions on p; but for the notes that ops and
// Redis's answers make without them, which is why it swaps with compare-and-swap.
func (o *Owner) step(p int, e Event) Action {
	_, act := o.swap(p, e)
	return act
}

// swap is step, and also returns the Record p had before.
func (o *Owner) swap(p int, e Event) (was *Record, act Action) {
	t := o.parts.rec()
	if p < 0 || p >= len(t) {
		return idleRecord, 0
	}
	persistent := o.cfg.Redis != nil
	for {
		was = t[p].Load()
		next, act, err := Step(*was, e, persistent)
		if err != nil {
			o.unknownSteps.Add(1)
			o.cfg.Logger.Error("partition state machine: "+err.Error(), "partition", p)
			return was, 0
		}
		if next == *was || t[p].CompareAndSwap(was, &next) {
			return was, act
		}
	}
}

// claims are the partitions this node must hold: those it decides, and those whose
// counters are still on their way (nobody else may decide them before they arrive).
func (ps *parts) claims() lease.Set {
	s := lease.NewSet(ps.count())
	for p := range ps.rec() {
		if ps.get(p).Claimed() {
			s.Add(p)
		}
	}
	return s
}

// SetRing installs a new ring: partitions this node gains are claimed (and decided once
// their lease is granted); partitions it loses stop being decided at once and are
// handed on in the background (Redis: their deltas are written; without it, or with
// Redis down, their counters go to the new owner), still claimed until that is done,
// so the new owner cannot be granted them before it can see their counts.
func (o *Owner) SetRing(next *ring.Ring) { o.do(func() { o.setRing(next) }) }

// setRing is SetRing's step. The caller holds mu.
func (o *Owner) setRing(next *ring.Ring) {
	o.parts.size(next.PartitionCount())
	var lost []int
	partial := partialMemory{}
	o.decide.Lock()
	prev := o.ring.Swap(next)
	for p := range o.parts.rec() {
		m, ok := next.PartitionOwner(p)
		e := on(Lost)
		if ok && m.Name == o.cfg.Self {
			e = on(o.gainKind(p))
		}
		if was, act := o.swap(p, e); act&Release != 0 {
			lost = append(lost, p)
			partial.note(o, p, was)
		}
	}
	o.unlockDecide()
	o.endLends(func(l lend) bool { return left(prev, next, l.to) && !o.leaving(l.to) }, "the node they were handed to left the ring")
	o.cfg.Leases.SetClaims(o.parts.claims())
	if len(lost) > 0 {
		o.startRelease(lost, partial)
	}
	o.stepReleases() // a release in progress may take some of its partitions back
	o.wakeAfter()
}

// owns reports whether the ring in use makes this node p's owner.
func (o *Owner) owns(p int) bool {
	rg := o.ring.Load()
	if rg == nil {
		return false
	}
	m, ok := rg.PartitionOwner(p)
	return ok && m.Name == o.cfg.Self
}

// Holding reports how many partitions the ring gives this node, and how many of them it
// can decide now (it holds their lease and its memory of them is current).
func (o *Owner) Holding() (owned, held int) {
	if !o.sized() {
		return 0, 0
	}
	now := o.cfg.Clock.Since()
	up := o.redisUp()
	for p := range o.parts.rec() {
		if o.owns(p) {
			owned++
			if o.judge(p, now, up) == decideIt {
				held++
			}
		}
	}
	return owned, held
}

// HandingOn reports how many partitions have counters on their way: this node's
// counters to their new owner, or its own back from where they went (lent).
func (o *Owner) HandingOn() int {
	if !o.sized() {
		return 0
	}
	n := 0
	for p := range o.parts.rec() {
		switch o.parts.get(p) {
		case Releasing, ReleasingStale, Lent, LentStale:
			n++
		}
	}
	return n
}

// sized reports whether the first ring has come, and with it the per-partition state:
// SetRing sizes it before it stores the ring, so a reader that loads the ring first
// sees it whole (outside Owner.mu: status pages and metrics read it).
func (o *Owner) sized() bool { return o.ring.Load() != nil }

// UnknownTransitions counts the events the partition state machine did not expect in
// a partition's state (ErrUnknownTransition): each a flaw, logged, the state kept.
func (o *Owner) UnknownTransitions() uint64 { return o.unknownSteps.Load() }

// PartitionState is partition p's state on this node (Idle for one out of range).
func (o *Owner) PartitionState(p int) State { return o.parts.get(p) }

// States counts this node's partitions by state.
func (o *Owner) States() map[State]int {
	out := map[State]int{}
	if !o.sized() {
		return out
	}
	for p := range o.parts.rec() {
		out[o.parts.get(p)]++
	}
	return out
}
