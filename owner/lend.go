package owner

import (
	"time"

	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/ring"
)

// lend is a partition whose counters this node handed on (all or some of them) and
// which the ring gave back to it before they came back. It is this node's again and
// this node may still hold its lease (it claimed the partition throughout), but its
// memory lacks what it handed on: decided from that memory, a count would be short and
// an allow would admit past the limit. So it is claimed (nobody else is granted it) and
// not decided (Lent) until the counters return: a Handoff from the node they went to
// naming the partition (that node released it here), or that node left the ring other
// than gracefully (a crashed node's counts are lost, docs/guarantees.md; a cut-off
// one's are added when it returns), or lentMax passed. A node leaving gracefully hands
// them back before it stops (Config.Leaving).
//
// The same holds when the release had ended before the ring gave the partition back:
// the node the counters went to may not have been granted it yet, and this node could
// be granted it first, and decide from empty memory while they sit there (a node that
// left just after taking them; TestPartitionBackAfterItsReleaseEndedWaitsForItsCounters). So an ended release
// that sent counters remembers where for lentMax (Record.Lend, in Idle), and the partition is
// gained Lent (GainedLent). Where the counters went is the partition Record's Lend.

// lentMax bounds how long a lent partition waits for its counters: the node they went
// to hands them back as soon as its ring moves the partition here (retrying every second at most),
// so past this it cannot reach this node, which then decides from what it has (as a
// cut's new owner does, docs/guarantees.md) and adds the counters when they arrive.
const lentMax = 15 * time.Second

// handedBack makes p, which the ring gives this node and whose release just ended,
// decidable again, or lent when some of its counters went to another node (lentTo).
// The caller holds mu and decide.
func (o *Owner) handedBack(p int, lentTo map[int]string) {
	if to, ok := lentTo[p]; ok {
		o.step(p, Event{Kind: ReclaimedLent, Lend: lend{to: to, since: o.cfg.Clock.Since()}})
		return
	}
	o.step(p, on(Reclaimed))
}

// endLends ends the lends that ends says should end (event LendEnded) and reports
// whether there were any. The caller holds mu.
func (o *Owner) endLends(ends func(lend) bool, why string) bool {
	var done []int
	for p := range o.parts.rec() {
		if r := o.parts.at(p); (r.State == Lent || r.State == LentStale) && ends(r.Lend) {
			done = append(done, p)
		}
	}
	if len(done) == 0 {
		return false
	}
	o.decide.Lock()
	for _, p := range done {
		o.lendEnded(p, LendEnded)
	}
	o.unlockDecide()
	o.cfg.Logger.Warn("lent partitions decided again without their counters back; they are added when they arrive",
		"partitions", len(done), "why", why)
	return true
}

// lendEnded applies k (LendEnded or CountersBack) to the lent partition p. The caller
// holds mu and decide.
func (o *Owner) lendEnded(p int, k Kind) {
	if o.step(p, on(k))&Reload != 0 {
		o.kick() // its memory went stale while lent: reloaded now that all is back
	}
}

// returned ends the lends of the partitions among ps that a Handoff from the node named
// from just named: that node released them, and its counters of them were applied here
// first. A Handoff from any other node says nothing of them. The caller holds mu.
func (o *Owner) returned(from string, ps []int) bool {
	n := 0
	o.decide.Lock()
	for _, p := range ps {
		if r := o.parts.at(p); (r.State == Lent || r.State == LentStale) && r.Lend.to == from {
			o.lendEnded(p, CountersBack)
			n++
		}
	}
	o.unlockDecide()
	return n > 0
}

// expireLends ends the lends older than lentMax. The caller holds mu.
func (o *Owner) expireLends(now time.Duration) {
	o.endLends(func(l lend) bool { return now-l.since > lentMax || mutate.On(mutate.EndLendEarly) }, "not back within "+lentMax.String())
}

// left reports whether the member named name is in prev but not in next.
func left(prev, next *ring.Ring, name string) bool {
	if prev == nil {
		return false
	}
	_, was := prev.Member(name)
	_, is := next.Member(name)
	return was && !is
}

// handedOn is the event of the release of p ending with p not this node's, some of its
// counters at the node named to (none: nothing to remember). The caller holds mu.
func (o *Owner) handedOn(to string) Event {
	e := on(Released)
	if to != "" {
		e.Lend = lend{to: to, since: o.cfg.Clock.Since()}
	}
	return e
}

// gainKind is the kind of event of the ring giving p to this node: GainedLent, and p
// lent again, when an ended release sent its counters to a node within lentMax (unless
// that node left the ring other than gracefully, or is out of it), else Gained. The
// caller holds mu and decide.
func (o *Owner) gainKind(p int) Kind {
	r := o.parts.at(p)
	h := r.Lend
	if r.State != Idle || h.to == "" || o.cfg.Clock.Since()-h.since > lentMax {
		return Gained
	}
	if rg := o.ring.Load(); rg != nil {
		if _, in := rg.Member(h.to); !in && !o.leaving(h.to) {
			return Gained // crashed or cut off: as endLends would end it at once
		}
	}
	return GainedLent
}

// leaving reports whether the member named left gracefully (Config.Leaving).
func (o *Owner) leaving(name string) bool {
	return o.cfg.Leaving != nil && o.cfg.Leaving(name)
}
