package leaparray

import "math"

// Deltas: what was added to counters since the last Drain, kept only by a store made
// with WithDeltas (a node that persists to Redis writes them behind). A slab keeps, per
// slot, 1 + the index of the slot's entry in dl (0: nothing pending), and the entries in
// a list reused from drain to drain, so steady write-behind allocates nothing here. An
// entry holds its first bucket and is pointer-free, so that the list is a vec (mapped
// once large, outside the collector's heap): a flood of new counters waiting to be
// written costs a fixed 16 bytes each. The first bucket's index is kept relative to the
// slab's pendBase and its count in 32 bits, which nearly every flush interval's adds
// fit; a counter with more than one bucket pending, or one that does not fit, keeps
// them in more (each bucket in one place: the first, or more).

// Resets are kept per shard, by key, apart from the slots: a reset counter leaves its
// slot (and may never come back, while Redis still holds its old state), yet the reset
// must reach Redis before anything added afterwards, in the same delta.

// Delta is what happened to one counter since the last drain: whether it was reset, and
// what was added to it (after the reset, if any), bucket by bucket. A reset delta erases
// the counter's persisted state before its buckets are added.
type Delta struct {
	Key     string
	Spec    Spec
	Buckets []Bucket
	Reset   bool
}

type pendingDelta struct {
	slot  int32  // −1 once the counter is gone
	more  int32  // 1 + the index in the slab's more of its other buckets; 0: none
	index int32  // the first bucket's index less the slab's pendBase
	count uint32 // the first bucket's count; 0: none there
}

// holds reports whether e has anything pending.
func (e *pendingDelta) holds() bool { return e.count != 0 || e.more != 0 }

// pendingMore is a slab's buckets pending beyond each entry's first, with the free
// places in it: what was kept there is bounded by the counters with more than one bucket
// pending at once, not by how many ever had.
type pendingMore struct {
	lists [][]Bucket
	free  []int32
}

// noteAdd records n added to bucket j of slot.
func (s *slab[C]) noteAdd(slot int, j int64, n uint64) {
	if !s.deltas || n == 0 {
		return
	}
	idx := s.pend.s[slot]
	if idx == 0 {
		if len(s.dl.s) == 0 {
			s.pendBase = j
		}
		s.dl.push(pendingDelta{slot: int32(slot)})
		idx = uint32(len(s.dl.s))
		s.pend.s[slot] = idx
	}
	s.addPending(&s.dl.s[idx-1], j, n)
}

// addPending adds n to bucket j of e: most adds land in its first bucket.
func (s *slab[C]) addPending(e *pendingDelta, j int64, n uint64) {
	off := j - s.pendBase
	switch {
	case !e.holds() && off >= math.MinInt32 && off <= math.MaxInt32 && n <= math.MaxUint32:
		e.index, e.count = int32(off), uint32(n)
		return
	case e.count != 0 && int64(e.index) == off && uint64(e.count)+n <= math.MaxUint32:
		e.count += uint32(n)
		return
	case e.more == 0:
		e.more = s.more.take() + 1
	}
	bs := &s.more.lists[e.more-1]
	if e.count != 0 && int64(e.index) == off { // its count outgrows 32 bits: it moves to more
		*bs = append(*bs, Bucket{Index: j, Count: uint64(e.count)})
		e.count = 0
	}
	for i := range *bs {
		if (*bs)[i].Index == j {
			(*bs)[i].Count += n
			return
		}
	}
	*bs = append(*bs, Bucket{Index: j, Count: n})
}

// take returns a free place in m.
func (m *pendingMore) take() int32 {
	if k := len(m.free); k > 0 {
		i := m.free[k-1]
		m.free = m.free[:k-1]
		return i
	}
	m.lists = append(m.lists, nil)
	return int32(len(m.lists) - 1)
}

// bucketsOf returns a copy of e's pending buckets (nil: none).
func (s *slab[C]) bucketsOf(e *pendingDelta) []Bucket {
	var more []Bucket
	if e.more != 0 {
		more = s.more.lists[e.more-1]
	}
	if e.count == 0 && len(more) == 0 {
		return nil
	}
	out := make([]Bucket, 0, len(more)+1)
	if e.count != 0 {
		out = append(out, Bucket{Index: s.pendBase + int64(e.index), Count: uint64(e.count)})
	}
	return append(out, more...)
}

// clearEntry forgets what e holds pending.
func (s *slab[C]) clearEntry(e *pendingDelta) {
	if e.more != 0 {
		s.more.lists[e.more-1] = nil
		s.more.free = append(s.more.free, e.more-1)
	}
	e.index, e.count, e.more = 0, 0, 0
}

// takePending removes and returns slot's pending buckets (a copy).
func (s *slab[C]) takePending(slot int) []Bucket {
	if !s.deltas || s.pend.s[slot] == 0 {
		return nil
	}
	e := &s.dl.s[s.pend.s[slot]-1]
	out := s.bucketsOf(e)
	s.clearEntry(e)
	e.slot = -1
	s.pend.s[slot] = 0
	return out
}

// movePending follows a counter moved from slot last to slot (by remove).
func (s *slab[C]) movePending(last, slot int) {
	if !s.deltas {
		return
	}
	s.pend.s[slot] = s.pend.s[last]
	if idx := s.pend.s[slot]; idx != 0 {
		s.dl.s[idx-1].slot = int32(slot)
	}
}

// noteReset records that key was reset, when deltas are kept, and reports whether it
// did: the next Drain or Evict says so, ahead of what is added afterwards. Two resets
// before it are one.
func (sh *shard) noteReset(key string) bool {
	if !sh.narrow.deltas {
		return false
	}
	if sh.resets == nil {
		sh.resets = map[string]struct{}{}
	}
	sh.resets[key] = struct{}{}
	return true
}

// takeReset removes key's reset and reports whether there was one.
func (sh *shard) takeReset(key string) bool {
	if _, ok := sh.resets[key]; !ok {
		return false
	}
	delete(sh.resets, key)
	return true
}

// drain appends the shard's pending deltas to dst, a reset counter's flagged (those of
// counters not held carry no buckets), and clears them.
func (sh *shard) drain(dst []Delta, sp Spec) []Delta {
	from := len(dst)
	dst = sh.one.drain(dst, sp)
	dst = sh.narrow.drain(dst, sp)
	dst = sh.wide.drain(dst, sp)
	if len(sh.resets) == 0 {
		return dst
	}
	for i := from; i < len(dst); i++ {
		dst[i].Reset = sh.takeReset(dst[i].Key)
	}
	for key := range sh.resets {
		dst = append(dst, Delta{Key: key, Spec: sp, Reset: true})
	}
	sh.resets = nil // resets are rare: give the map back
	return dst
}

// drain appends every pending delta to dst and clears them.
func (s *slab[C]) drain(dst []Delta, sp Spec) []Delta {
	for i := range s.dl.s {
		e := &s.dl.s[i]
		if e.slot >= 0 && e.holds() {
			dst = append(dst, Delta{Key: s.key(int(e.slot)), Spec: sp, Buckets: s.bucketsOf(e)})
			s.pend.s[e.slot] = 0
		}
	}
	s.emptyList()
	return dst
}

// emptyList empties the pending list once all of it is drained. The list is reused from
// drain to drain, but a burst's list goes once traffic falls: memory follows the live
// set.
func (s *slab[C]) emptyList() {
	drained := len(s.dl.s)
	s.dl.truncate(0)
	if cap(s.dl.s) > 64 && drained*4 < cap(s.dl.s) {
		s.dl.realloc(drained * 2)
	}
	s.more = pendingMore{}
}

// pendingOf returns a copy of slot's pending buckets.
func (s *slab[C]) pendingOf(slot int) []Bucket {
	if !s.deltas || s.pend.s[slot] == 0 {
		return nil
	}
	return s.bucketsOf(&s.dl.s[s.pend.s[slot]-1])
}

// drainSome is drain for at most max counters, of those within quota (how many of
// each pending list's first entries the pass may take): it reports whether the quota is
// used up, and then, as drain does, appends the resets still recorded.
func (sh *shard) drainSome(dst []Delta, sp Spec, quota *[3]int, max int) ([]Delta, bool) {
	from := len(dst)
	dst, quota[0] = sh.one.drainSome(dst, sp, quota[0], max)
	dst, quota[1] = sh.narrow.drainSome(dst, sp, quota[1], max-(len(dst)-from))
	dst, quota[2] = sh.wide.drainSome(dst, sp, quota[2], max-(len(dst)-from))
	for i := from; i < len(dst) && len(sh.resets) > 0; i++ {
		dst[i].Reset = sh.takeReset(dst[i].Key)
	}
	if *quota != [3]int{} {
		return dst, false
	}
	for key := range sh.resets {
		dst = append(dst, Delta{Key: key, Spec: sp, Reset: true})
	}
	sh.resets = nil
	return dst, true
}

// drainSome takes up to max counters' deltas from the first quota entries of the
// pending list and returns what is left of the quota. The entries not taken move to the
// front, in order, so that the next part starts with them.
func (s *slab[C]) drainSome(dst []Delta, sp Spec, quota, max int) ([]Delta, int) {
	dl := s.dl.s
	quota = min(quota, len(dl))
	k := 0
	for taken := 0; k < quota && taken < max; k++ {
		e := &dl[k]
		if e.slot < 0 {
			continue
		}
		if e.holds() {
			dst = append(dst, Delta{Key: s.key(int(e.slot)), Spec: sp, Buckets: s.bucketsOf(e)})
			taken++
		}
		s.clearEntry(e)
		s.pend.s[e.slot] = 0
	}
	if k == len(dl) {
		s.emptyList()
		return dst, 0
	}
	if k > 0 {
		n := copy(dl, dl[k:])
		for i := range n {
			if slot := dl[i].slot; slot >= 0 {
				s.pend.s[slot] = uint32(i + 1)
			}
		}
		s.dl.truncate(n)
	}
	return dst, quota - k
}
