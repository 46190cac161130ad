package leaparray

import "slices"

// Take: giving back what was added and not spent. A node that lends a slice of a limit
// adds the whole slice into the counter's current bucket at once; when the slice ends,
// the part not spent comes off that bucket again, here, and off what the bucket has
// pending, so that it neither counts against the limit here nor reaches the
// persistence store if it has not yet.

// Take takes up to n off bucket j (a bucket index, floorDiv(ms, bucketMs) as the store's
// own ops use) of the counter at time now, and returns how much it took off the count in
// memory. It takes from memory only while bucket j is still within the counter's window
// at now (counts never go below zero, the ring's running sum stays exact), and, in a
// store made WithDeltas, also takes up to n off what bucket j has pending to be written
// (never below zero; the pending part may be smaller than what memory held, e.g.
// because part was already drained and written). A counter not held, or a bucket that
// has left the window, takes nothing from memory; Take never creates a counter or a
// table, and costs nothing for an unknown Spec.
//
// What the persistence store already holds of the bucket stays there: rewriting the
// counter there could erase what another node wrote of it that this memory lacks (a
// write landing late, after this node loaded the counter). A node that loads the
// counter again counts that part until the bucket leaves the window: under-admission.
func (s *Store) Take(key string, sp Spec, j, n, now int64) int64 {
	want := nonNeg(n)
	if want == 0 {
		return 0
	}
	var took uint64
	s.locked(key, sp, lookup, func(sh *shard, h uint64, bucketMs int64) {
		if r, at := sh.at(key, h, floorDiv(now, bucketMs), lookup); r.slot >= 0 {
			sh.materialize(r) // pending and memory part here
			took = sh.take(r, at, j, want)
			sh.takePendingAt(r, j, want)
		}
	})
	return clampInt(took)
}

// take takes up to n off bucket j of r at bucket at (at >= head) and returns what it
// took.
func (sh *shard) take(r ref, at, j int64, n uint64) uint64 {
	switch r.tier {
	case one:
		return takeOne(&sh.one.heads.s[r.slot], sh.b, at, j, n)
	case narrow:
		hd, counts := sh.narrow.ring(r.slot)
		return takeAt(hd, counts, at, j, n)
	}
	hd, counts := sh.wide.ring(r.slot)
	return takeAt(hd, counts, at, j, n)
}

// takeAt takes up to n off bucket j at bucket at (at >= head) and returns what it took.
// Only a bucket the ring holds that is still in the window at at has anything to take:
// a bucket past the head holds nothing yet, and one that has left the window counts for
// nothing, so taking from it would give back nothing the count holds.
func takeAt[C count](h *head, counts []C, at, j int64, n uint64) uint64 {
	if j > h.bucket || j <= at-int64(len(counts)) {
		return 0
	}
	s := slot(j, len(counts))
	t := min(uint64(counts[s]), n)
	counts[s] -= C(t)
	h.sum -= t
	return t
}

// takeOne is takeAt for the one-bucket form, whose only bucket is its head. A head left
// at zero keeps the counter in that form: the next add to another bucket moves its head
// (staysOne).
func takeOne(h *head, b int64, at, j int64, n uint64) uint64 {
	if j != h.bucket || j <= at-b {
		return 0
	}
	t := min(h.sum, n)
	h.sum -= t
	return t
}

func (sh *shard) takePendingAt(r ref, j int64, n uint64) {
	switch r.tier {
	case one:
		sh.one.takePendingAt(r.slot, j, n)
	case narrow:
		sh.narrow.takePendingAt(r.slot, j, n)
	default:
		sh.wide.takePendingAt(r.slot, j, n)
	}
}

// takePendingAt takes up to n off what bucket j of slot has pending, whether or not the
// bucket is still in the window: what was given back must not reach the persistence
// store either way. A bucket left at zero is dropped, so that no Delta carries an empty
// bucket, and a counter left with nothing pending lets go of its entry as takePending
// does: Drain then gives it no Delta, as if it had not been added to.
func (s *slab[C]) takePendingAt(slot int, j int64, n uint64) {
	if !s.deltas || s.pend.s[slot] == 0 || s.isWhole(slot) { // Take materialized a mark
		return
	}
	e := &s.dl.s[s.pend.s[slot]-1]
	if c := e.count(); c != 0 && s.pendBase+e.index() == j {
		e.first -= uint32(min(uint64(c), n)) // at most the count: nothing borrows from the index
		if e.count() == 0 {
			e.first &= firstMore
		}
	} else if e.hasMore() { // each bucket is in one place: the first, or more
		s.takeMore(e, j, n)
	}
	if !e.holds() {
		e.slot = -1
		s.pend.s[slot] = 0
	}
}

// takeMore takes up to n off bucket j in e's more, dropping the bucket when it is left
// at zero and e's flag when more is left empty.
func (s *slab[C]) takeMore(e *pendingDelta, j int64, n uint64) {
	bs := s.more[e.slot]
	i := slices.IndexFunc(bs, func(b Bucket) bool { return b.Index == j })
	if i < 0 {
		return
	}
	if bs[i].Count -= min(bs[i].Count, n); bs[i].Count == 0 {
		bs = slices.Delete(bs, i, i+1)
	}
	if len(bs) == 0 {
		delete(s.more, e.slot)
		e.first &^= firstMore
		return
	}
	s.more[e.slot] = bs
}
