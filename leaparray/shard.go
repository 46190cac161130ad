package leaparray

import "sync"

// shard is one lock's worth of a table: the counters whose key hashes to it. Counters
// start in the one slab (a head and no ring: one.go), move to the narrow slab (uint32
// buckets: half the memory of wide ones) at their second bucket in a window, and to the
// wide slab the first time a bucket would overflow.
type shard struct {
	mu     sync.Mutex
	one    slab[uint64] // no ring (b = 0): the counters whose count is all in their head bucket
	narrow slab[uint32]
	wide   slab[uint64]
	b      int64               // buckets per counter
	sweep  int                 // next slot the sweep looks at: one's, then narrow's, then wide's
	resets map[string]struct{} // with WithDeltas: keys reset since the last drain (delta.go)
	lim    *bounds             // the store's, with WithBounds; nil otherwise
	units  int64               // what one counter here weighs against lim (Units)
	_      [64]byte
}

func (sh *shard) init(sp Spec, deltas bool, lim *bounds) {
	sh.b = int64(sp.Buckets)
	sh.narrow.b = sp.Buckets
	sh.wide.b = sp.Buckets
	sh.lim, sh.units = lim, Units(sp)
	sh.one.deltas, sh.narrow.deltas, sh.wide.deltas = deltas, deltas, deltas
}

// tier is the slab a counter is in.
type tier uint8

const (
	one tier = iota
	narrow
	wide
)

// ref names one counter in a shard: which slab, which slot.
type ref struct {
	tier tier
	slot int
}

func (sh *shard) find(key string, h uint64) (ref, bool) {
	if i := sh.one.find(key, h); i >= 0 {
		return ref{tier: one, slot: i}, true
	}
	if len(sh.narrow.refs.s) > 0 {
		if i := sh.narrow.find(key, h); i >= 0 {
			return ref{tier: narrow, slot: i}, true
		}
	}
	if len(sh.wide.refs.s) > 0 {
		if i := sh.wide.find(key, h); i >= 0 {
			return ref{tier: wide, slot: i}, true
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
	return ref{tier: one, slot: sh.one.insert(key, h, j)}, true
}

func (sh *shard) headOf(r ref) *head {
	switch r.tier {
	case one:
		return &sh.one.heads.s[r.slot]
	case narrow:
		return &sh.narrow.heads.s[r.slot]
	}
	return &sh.wide.heads.s[r.slot]
}

// widen makes room for n more in bucket j of r, moving the counter into a ring if it
// leaves the one-bucket form, and to the wide slab if a narrow bucket would overflow,
// and returns where the counter now is.
func (sh *shard) widen(key string, h uint64, r ref, j int64, n uint64) ref {
	if r.tier == one {
		if staysOne(&sh.one.heads.s[r.slot], sh.b, j, n) {
			return r
		}
		r = sh.unfold(key, h, r)
	}
	if r.tier == wide {
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
	if sh.narrow.isWhole(r.slot) { // what is not yet written behind moves too
		sh.narrow.clearWhole(r.slot)
		sh.wide.markWhole(w)
	}
	for _, b := range sh.narrow.takePending(r.slot) {
		sh.wide.noteAdd(w, b.Index, b.Count)
	}
	sh.narrow.remove(r.slot, h)
	return ref{tier: wide, slot: w}
}

func (sh *shard) add(r ref, j int64, n uint64) uint64 {
	switch r.tier {
	case one:
		return addOne(&sh.one.heads.s[r.slot], j, n)
	case narrow:
		hd, counts := sh.narrow.ring(r.slot)
		return addAt(hd, counts, j, n)
	}
	hd, counts := sh.wide.ring(r.slot)
	return addAt(hd, counts, j, n)
}

// incr adds n at bucket j (j >= head) and records it as pending when deltas are kept.
func (sh *shard) incr(r ref, j int64, n uint64) uint64 {
	sh.noteAdd(r, j, n)
	return sh.add(r, j, n)
}

func (sh *shard) noteAdd(r ref, j int64, n uint64) {
	switch r.tier {
	case one:
		sh.one.noteAdd(r.slot, j, n)
	case narrow:
		sh.narrow.noteAdd(r.slot, j, n)
	default:
		sh.wide.noteAdd(r.slot, j, n)
	}
}

func (sh *shard) count(r ref, j int64) uint64 {
	switch r.tier {
	case one:
		return countOne(&sh.one.heads.s[r.slot], sh.b, j)
	case narrow:
		hd, counts := sh.narrow.ring(r.slot)
		return countAt(hd, counts, j)
	}
	hd, counts := sh.wide.ring(r.slot)
	return countAt(hd, counts, j)
}

func (sh *shard) allow(r ref, now, j, bucketMs int64, limit, n uint64) Decision {
	switch r.tier {
	case one:
		return allowOne(&sh.one.heads.s[r.slot], sh.b, now, j, bucketMs, limit, n)
	case narrow:
		hd, counts := sh.narrow.ring(r.slot)
		return allowAt(hd, counts, now, j, bucketMs, limit, n)
	}
	hd, counts := sh.wide.ring(r.slot)
	return allowAt(hd, counts, now, j, bucketMs, limit, n)
}

func (sh *shard) buckets(dst []Bucket, r ref) []Bucket {
	switch r.tier {
	case one:
		return sh.one.appendBuckets(dst, r.slot)
	case narrow:
		return sh.narrow.appendBuckets(dst, r.slot)
	}
	return sh.wide.appendBuckets(dst, r.slot)
}

func (sh *shard) remove(r ref, h uint64) {
	sh.lim.give(sh.units)
	switch r.tier {
	case one:
		sh.one.remove(r.slot, h)
	case narrow:
		sh.narrow.remove(r.slot, h)
	default:
		sh.wide.remove(r.slot, h)
	}
}

func (sh *shard) key(r ref) string {
	switch r.tier {
	case one:
		return sh.one.key(r.slot)
	case narrow:
		return sh.narrow.key(r.slot)
	}
	return sh.wide.key(r.slot)
}

// nth is the i-th counter of the shard counting through one's slots, then narrow's, then
// wide's; false past the last.
func (sh *shard) nth(i int) (ref, bool) {
	if i < len(sh.one.refs.s) {
		return ref{tier: one, slot: i}, true
	}
	i -= len(sh.one.refs.s)
	if i < len(sh.narrow.refs.s) {
		return ref{tier: narrow, slot: i}, true
	}
	i -= len(sh.narrow.refs.s)
	if i < len(sh.wide.refs.s) {
		return ref{tier: wide, slot: i}, true
	}
	return ref{}, false
}

func (sh *shard) len() int { return len(sh.one.refs.s) + len(sh.narrow.refs.s) + len(sh.wide.refs.s) }

// free empties the shard's slabs and gives their memory back.
func (sh *shard) free() {
	sh.one.free()
	sh.narrow.free()
	sh.wide.free()
}
