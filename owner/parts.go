package owner

import (
	"sync/atomic"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// parts is the per-partition state. States change only through step, under Owner.mu
// and, for the changes that stop or start decisions, under Owner.decide held
// exclusively; ops read them without a lock.
type parts struct {
	state   []atomic.Uint32 // a State
	gen     []atomic.Uint64 // bumped by every transition: a load begun before one is not used
	blind   []atomic.Bool   // counters were decided from empty memory while Redis was down
	decided []decidedSince  // since when each partition is decided here without a break
	stamped []atomic.Int64  // when this node last stamped each partition written (fresh.go), ms
	lent    map[int]lend    // the Lent partitions; under Owner.mu
	handed  map[int]lend    // Idle partitions whose counters went to another node lately (lend.go); under Owner.mu
}

func (ps *parts) init() { ps.lent, ps.handed = map[int]lend{}, map[int]lend{} }

func (ps *parts) size(n int) {
	if len(ps.state) == 0 {
		ps.state = make([]atomic.Uint32, n)
		ps.gen = make([]atomic.Uint64, n)
		ps.blind = make([]atomic.Bool, n)
		ps.decided = make([]decidedSince, n)
		ps.stamped = make([]atomic.Int64, n)
	}
}

func (ps *parts) get(p int) State {
	if p < 0 || p >= len(ps.state) {
		return Idle
	}
	return State(ps.state[p].Load())
}

// step applies e to partition p (Step) and returns the action it calls for. The caller
// holds Owner.mu, and Owner.decide exclusively whenever the step may stop or start
// decisions on p.
func (o *Owner) step(p int, e Event) Action {
	was := o.parts.get(p)
	next, act, err := Step(was, e, o.cfg.Redis != nil)
	if err != nil {
		o.unknownSteps.Add(1)
		o.cfg.Logger.Error("partition state machine", "partition", p, "err", err)
		return 0
	}
	if next == was {
		return 0
	}
	o.parts.state[p].Store(uint32(next))
	o.parts.gen[p].Add(1)
	if e == Gained {
		d := &o.parts.decided[p]
		d.gainedDeparted.Store(d.departed.Load())
	}
	if next == Releasing {
		o.epoch.due.Remove(p) // its memory leaves: nothing of it to write back (reseed.go)
	}
	return act
}

// claims are the partitions this node must hold: those it decides, and those whose
// counters are still on their way (nobody else may decide them before they arrive).
func (ps *parts) claims() lease.Set {
	s := lease.NewSet(len(ps.state))
	for p := range ps.state {
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
func (o *Owner) SetRing(next *ring.Ring) {
	o.mu.Lock()
	o.parts.size(next.PartitionCount())
	var lost []int
	partial := partialMemory{}
	o.decide.Lock()
	prev := o.ring.Swap(next)
	for p := range o.parts.state {
		m, ok := next.PartitionOwner(p)
		e := Lost
		if ok && m.Name == o.cfg.Self {
			e = o.gainEvent(p)
		}
		was := o.parts.get(p)
		if o.step(p, e)&Release != 0 {
			delete(o.parts.lent, p)
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
	o.mu.Unlock()
	o.wake()
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
	now := o.cfg.Leases.Now()
	up := o.redisUp()
	for p := range o.parts.state {
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
	for p := range o.parts.state {
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
	for p := range o.parts.state {
		out[o.parts.get(p)]++
	}
	return out
}
