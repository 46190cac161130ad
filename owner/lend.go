package owner

import (
	"time"

	"github.com/leapcount/leapcount/ring"
)

// lend is a partition whose counters this node handed on (all or some of them) and
// which the ring gave back to it before they came back. It is this node's again and
// this node may still hold its lease (it claimed the partition throughout), but its
// memory lacks what it handed on: decided from that memory, a count would be short and
// an allow would admit past the limit. So it is claimed (nobody else is granted it) and
// not decided (stLent) until the counters return: a Handoff naming the partition (its
// holder released it here), or their holder left the ring (a node that leaves without
// handing on loses its counts, README: Guarantees), or lentMax passed.
type lend struct {
	to    string // the node its counters went to last
	since time.Time
}

// lentMax bounds how long a lent partition waits for its counters: their holder hands
// them back as soon as its ring moves the partition here (retrying every 2s at most),
// so past this it cannot reach this node, which then decides from what it has (as a
// cut's new owner does, README: Guarantees) and adds the counters when they arrive.
const lentMax = 15 * time.Second

// lendOrOwn marks p, which the ring gives this node, decidable (stMine), or lent when
// some of its counters went to another node (lentTo). Callers hold parts.mu and decide.
func (o *Owner) lendOrOwn(p int, lentTo map[int]string) {
	if to, ok := lentTo[p]; ok {
		o.parts.set(p, stLent)
		o.parts.lent[p] = lend{to: to, since: time.Now()}
		return
	}
	o.parts.set(p, stMine)
}

// endLends makes the lent partitions that end (per ends) decidable again, and reports
// whether there were any. The caller holds parts.mu, and signals parts changed.
func (o *Owner) endLends(ends func(lend) bool, why string) bool {
	var done []int
	for p, l := range o.parts.lent {
		if ends(l) {
			done = append(done, p)
		}
	}
	if len(done) == 0 {
		return false
	}
	o.decide.Lock()
	for _, p := range done {
		if o.parts.get(p) == stLent {
			o.parts.set(p, stMine)
		}
		delete(o.parts.lent, p)
	}
	o.decide.Unlock()
	o.cfg.Logger.Warn("lent partitions decided again without their counters back; they are added when they arrive",
		"partitions", len(done), "why", why)
	return true
}

// returned makes the lent partitions among ps, which a Handoff just applied here named
// (their sender released them: its counters of them were applied here first),
// decidable again.
func (o *Owner) returned(ps []int) {
	o.parts.mu.Lock()
	defer o.parts.mu.Unlock()
	n := 0
	o.decide.Lock()
	for _, p := range ps {
		if _, ok := o.parts.lent[p]; ok && o.parts.get(p) == stLent {
			o.parts.set(p, stMine)
			delete(o.parts.lent, p)
			n++
		}
	}
	o.decide.Unlock()
	if n > 0 {
		o.parts.signal()
	}
}

// expireLends ends the lends older than lentMax.
func (o *Owner) expireLends() {
	o.parts.mu.Lock()
	defer o.parts.mu.Unlock()
	if o.endLends(func(l lend) bool { return time.Since(l.since) > lentMax }, "not back within "+lentMax.String()) {
		o.parts.signal()
	}
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
