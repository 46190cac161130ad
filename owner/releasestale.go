package owner

import (
	"slices"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// releaseStale makes the counters of partitions ps that are on their way to a new owner
// go as their pending part alone (they became ReleasingStale: another node may have
// decided them since); a Handoff already sent, or in doubt, goes as it went. The caller
// holds mu.
func (o *Owner) releaseStale(ps []int) {
	rg := o.ring.Load()
	if len(ps) == 0 || rg == nil {
		return
	}
	set := setOf(rg, ps)
	for _, rel := range o.releases.jobs {
		for _, p := range ps {
			if !containsInt(rel.parts, p) {
				continue
			}
			if rel.partial.stale == nil {
				rel.partial.stale = map[int]bool{}
			}
			rel.partial.stale[p] = true
			for i := range rel.byPart[p] {
				rel.byPart[p][i].Buckets = nil
				o.sentWithoutBuckets(p, &rel.byPart[p][i])
			}
		}
		for _, sd := range rel.sends {
			from := sd.done
			if sd.h != nil {
				from += sd.n
			}
			for i := from; i < len(sd.cs); i++ {
				if p := rg.Partition(sd.cs[i].Key); set.Has(p) {
					sd.cs[i].Buckets = nil
					o.sentWithoutBuckets(p, &sd.cs[i])
				}
			}
		}
	}
}

// partialMemory is, of partitions being released, those whose memory may lack what
// Redis holds: stale ones whole, and the keys started blind of others.
type partialMemory struct {
	stale map[int]bool
	blind map[int]*blindSet
}

// note records partition p, whose state was was, as it starts to be released. The
// caller holds mu and decide.
func (pm *partialMemory) note(o *Owner, p int, was *Record) {
	if was.State == Stale || was.State == LentStale {
		if pm.stale == nil {
			pm.stale = map[int]bool{}
		}
		pm.stale[p] = true
	}
	if was.Blind { // (the step to Releasing cleared it)
		if bs := o.blind.take(p); bs != nil {
			if pm.blind == nil {
				pm.blind = map[int]*blindSet{}
			}
			pm.blind[p] = bs
		}
	}
}

func (pm partialMemory) has(p int, key string) bool {
	if pm.stale[p] {
		return true
	}
	bs := pm.blind[p]
	if bs == nil {
		return false
	}
	_, ok := bs.keys[key]
	return bs.all || ok
}

// dropReleasedResets makes the counters of partitions ps on their way to a new owner
// go without their reset (dropLateResets): the lease under which it was decided lapsed
// before it was handed on, and the new owner may have been granted the partition
// since and decided the counter; applied then, the reset would erase that (sim seed
// 114162). What the reset erased may come back, as for one stripped on its way to
// Redis (docs/guarantees.md). A Handoff in flight or in doubt loses it when it goes
// again: had it been applied, its receiver takes it as applied again by its id,
// whatever it carries. It reports how many resets it dropped. The caller holds mu.
func (o *Owner) dropReleasedResets(rg *ring.Ring, ps lease.Set) int {
	n := 0
	drop := func(c *HandoffCounter) {
		if c.Reset && ps.Has(rg.Partition(c.Key)) {
			c.Reset = false
			n++
		}
	}
	for _, rel := range o.releases.jobs {
		for i := range rel.ev {
			if e := &rel.ev[i]; e.Reset && ps.Has(rg.Partition(e.Key)) {
				e.Reset = false
				n++
			}
		}
		for p, cs := range rel.byPart {
			if ps.Has(p) {
				for i := range cs {
					drop(&cs[i])
				}
			}
		}
		for _, sd := range rel.sends {
			from := sd.done
			if sd.h != nil {
				from += sd.n
				if hasResetIn(rg, ps, sd.h.Counters) {
					if sd.lapsed == nil {
						sd.lapsed = lease.NewSet(rg.PartitionCount())
					}
					ps.Each(sd.lapsed.Add)
				}
			}
			for i := from; i < len(sd.cs); i++ {
				drop(&sd.cs[i])
			}
		}
	}
	return n
}

// hasResetIn reports whether a counter of cs in partitions ps carries a reset.
func hasResetIn(rg *ring.Ring, ps lease.Set, cs []HandoffCounter) bool {
	for i := range cs {
		if cs[i].Reset && ps.Has(rg.Partition(cs[i].Key)) {
			return true
		}
	}
	return false
}

// withoutResetsIn is h, to go again, without the resets of its counters in partitions
// ps, whose lease lapsed while it was in flight or in doubt (dropReleasedResets): a copy
// with the same id, so that h itself, which the last send may still be reading, is left
// as it is.
func withoutResetsIn(rg *ring.Ring, ps lease.Set, h *Handoff) *Handoff {
	c := *h
	c.Counters = slices.Clone(h.Counters)
	for i := range c.Counters {
		if ps.Has(rg.Partition(c.Counters[i].Key)) {
			c.Counters[i].Reset = false
		}
	}
	return &c
}
