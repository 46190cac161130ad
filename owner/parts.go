package owner

import (
	"sync"
	"sync/atomic"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// The states of a partition on this node. Only stMine (and stStale while Redis is
// down) are decided here, and only while the lease holds.
const (
	stIdle      uint32 = iota // not this node's, and nothing of it is here
	stMine                    // this node's in its ring: claimed, decided while the lease holds
	stStale                   // this node's, but its memory may be stale: flushed and dropped before it is decided again
	stReleasing               // no longer this node's: its counters are being handed on; still claimed, never decided
	stDropping                // this node's: its stale memory is being dropped; never decided meanwhile
	stLent                    // this node's again, but its counters were handed to another node that has not handed them back: claimed, never decided (lend.go)
)

// parts is the per-partition state. Transitions happen under mu and, for the ones
// that stop or start decisions, under Owner.decide held exclusively.
type parts struct {
	mu      sync.Mutex
	state   []atomic.Uint32
	gen     []atomic.Uint64 // bumped by every transition: a load begun before one is not used
	blind   []atomic.Bool   // counters were decided from empty memory while Redis was down
	decided []decidedSince  // since when each partition is decided here without a break
	stamped []atomic.Int64  // when this node last stamped each partition written (fresh.go), ms
	lent    map[int]lend    // the stLent partitions; under mu
	changed atomic.Pointer[chan struct{}]
}

func (ps *parts) init() {
	ps.lent = map[int]lend{}
	ch := make(chan struct{})
	ps.changed.Store(&ch)
}

func (ps *parts) size(n int) {
	if len(ps.state) == 0 {
		ps.state = make([]atomic.Uint32, n)
		ps.gen = make([]atomic.Uint64, n)
		ps.blind = make([]atomic.Bool, n)
		ps.decided = make([]decidedSince, n)
		ps.stamped = make([]atomic.Int64, n)
	}
}

func (ps *parts) get(p int) uint32 {
	if p < 0 || p >= len(ps.state) {
		return stIdle
	}
	return ps.state[p].Load()
}

func (ps *parts) set(p int, st uint32) {
	ps.state[p].Store(st)
	ps.gen[p].Add(1)
}

func (ps *parts) signal() {
	ch := make(chan struct{})
	close(*ps.changed.Swap(&ch))
}

// claims are the partitions this node must hold: those it decides, and those it still
// hands on (nobody else may decide them before they arrive).
func (ps *parts) claims() lease.Set {
	s := lease.NewSet(len(ps.state))
	for p := range ps.state {
		if st := ps.state[p].Load(); st != stIdle {
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
	o.parts.mu.Lock()
	defer o.parts.mu.Unlock()
	o.parts.size(next.PartitionCount())
	var lost []int
	o.decide.Lock()
	prev := o.ring.Swap(next)
	for p := range o.parts.state {
		m, ok := next.PartitionOwner(p)
		mine := ok && m.Name == o.cfg.Self
		switch st := o.parts.get(p); {
		case st == stIdle && mine:
			o.parts.set(p, stMine)
		case (st == stMine || st == stStale || st == stLent) && !mine:
			o.parts.set(p, stReleasing)
			delete(o.parts.lent, p)
			lost = append(lost, p)
		}
	}
	o.decide.Unlock()
	o.endLends(func(l lend) bool { return left(prev, next, l.to) }, "the node they were handed to left the ring")
	o.cfg.Leases.SetClaims(o.parts.claims())
	o.parts.signal()
	if len(lost) > 0 {
		o.releases.Add(1)
		go o.release(lost)
	}
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
	now := o.cfg.Leases.Now()
	for p := range o.parts.state {
		if o.owns(p) {
			owned++
			if o.judge(p, now, o.redisUp()) == decideIt {
				held++
			}
		}
	}
	return owned, held
}

// HandingOn reports how many partitions have counters on their way: this node's
// counters to their new owner, or its own back from where they went (lent).
func (o *Owner) HandingOn() int {
	n := 0
	for p := range o.parts.state {
		if st := o.parts.get(p); st == stReleasing || st == stLent {
			n++
		}
	}
	return n
}
