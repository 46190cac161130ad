package leaparray

import "sync"

// shard is one lock's worth of a table: the counters whose key hashes to it. Counters
// start in the narrow slab (uint32 buckets: half the memory) and move to the wide slab
// the first time a bucket would overflow.
type shard struct {
	mu     sync.Mutex
	narrow slab[uint32]
	wide   slab[uint64]
	sweep  int                 // next narrow slot the sweep looks at; wide slots follow
	resets map[string]struct{} // with WithDeltas: keys reset since the last drain (delta.go)
	lim    *bounds             // the store's, with WithBounds; nil otherwise
	units  int64               // what one counter here weighs against lim (Units)
	_      [64]byte
}

func (sh *shard) init(sp Spec, deltas bool, lim *bounds) {
	sh.narrow.b = sp.Buckets
	sh.wide.b = sp.Buckets
	sh.lim, sh.units = lim, Units(sp)
	if deltas {
		sh.narrow.pend, sh.wide.pend = []uint32{}, []uint32{}
	}
}

// ref names one counter in a shard: which slab, which slot.
type ref struct {
	wide bool
	slot int
}

func (sh *shard) find(key string, h uint64) (ref, bool) {
	if i := sh.narrow.find(key, h); i >= 0 {
		return ref{slot: i}, true
	}
	if len(sh.wide.refs) > 0 {
		if i := sh.wide.find(key, h); i >= 0 {
			return ref{wide: true, slot: i}, true
		}
	}
	return ref{}, false
}

// create inserts an empty counter with its head at bucket j, if m lets it (see mode),
// and reports whether it did.
func (sh *shard) create(key string, h uint64, j int64, m mode) (ref, bool) {
	if m == lookup || !sh.lim.take(sh.units, m) {
		return ref{slot: -1}, false
	}
	return ref{slot: sh.narrow.insert(key, h, j)}, true
}

func (sh *shard) headOf(r ref) *head {
	if r.wide {
		return &sh.wide.heads[r.slot]
	}
	return &sh.narrow.heads[r.slot]
}

// widen makes room for n more in bucket j of r, moving the counter to the wide slab if
// a narrow bucket would overflow, and returns where the counter now is.
func (sh *shard) widen(key string, h uint64, r ref, j int64, n uint64) ref {
	if r.wide {
		return r
	}
	hd, counts := sh.narrow.ring(r.slot)
	if fits(hd, counts, j, n) {
		return r
	}
	w := sh.wide.insert(key, h, hd.bucket)
	whd, wcounts := sh.wide.ring(w)
	*whd = *hd
	for i, c := range counts {
		wcounts[i] = uint64(c)
	}
	for _, b := range sh.narrow.takePending(r.slot) { // what is not yet written behind moves too
		sh.wide.noteAdd(w, b.Index, b.Count)
	}
	sh.narrow.remove(r.slot, h)
	return ref{wide: true, slot: w}
}

func (sh *shard) add(r ref, j int64, n uint64) uint64 {
	if r.wide {
		hd, counts := sh.wide.ring(r.slot)
		return addAt(hd, counts, j, n)
	}
	hd, counts := sh.narrow.ring(r.slot)
	return addAt(hd, counts, j, n)
}

// incr adds n at bucket j (j >= head) and records it as pending when deltas are kept.
func (sh *shard) incr(r ref, j int64, n uint64) uint64 {
	sh.noteAdd(r, j, n)
	return sh.add(r, j, n)
}

func (sh *shard) noteAdd(r ref, j int64, n uint64) {
	if r.wide {
		sh.wide.noteAdd(r.slot, j, n)
	} else {
		sh.narrow.noteAdd(r.slot, j, n)
	}
}

func (sh *shard) count(r ref, j int64) uint64 {
	if r.wide {
		hd, counts := sh.wide.ring(r.slot)
		return countAt(hd, counts, j)
	}
	hd, counts := sh.narrow.ring(r.slot)
	return countAt(hd, counts, j)
}

func (sh *shard) allow(r ref, now, j, bucketMs int64, limit, n uint64) Decision {
	if r.wide {
		hd, counts := sh.wide.ring(r.slot)
		return allowAt(hd, counts, now, j, bucketMs, limit, n)
	}
	hd, counts := sh.narrow.ring(r.slot)
	return allowAt(hd, counts, now, j, bucketMs, limit, n)
}

func (sh *shard) buckets(dst []Bucket, r ref) []Bucket {
	if r.wide {
		hd, counts := sh.wide.ring(r.slot)
		return appendBuckets(dst, hd, counts)
	}
	hd, counts := sh.narrow.ring(r.slot)
	return appendBuckets(dst, hd, counts)
}

func (sh *shard) remove(r ref, h uint64) {
	sh.lim.give(sh.units)
	if r.wide {
		sh.wide.remove(r.slot, h)
	} else {
		sh.narrow.remove(r.slot, h)
	}
}

func (sh *shard) len() int { return len(sh.narrow.refs) + len(sh.wide.refs) }
