package owner

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
