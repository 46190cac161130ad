package leaparray

// Deltas: what was added to counters since the last Drain, kept only by a store made
// with WithDeltas (a node that persists to Redis writes them behind). A slab keeps, per
// slot, 1 + the index of the slot's entry in dl (0: nothing pending), and the entries in
// a list reused from drain to drain, so steady write-behind allocates nothing here.
//
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
	slot    int32 // −1 once the counter is gone
	buckets []Bucket
}

// noteAdd records n added to bucket j of slot.
func (s *slab[C]) noteAdd(slot int, j int64, n uint64) {
	if !s.deltas || n == 0 {
		return
	}
	idx := s.pend.s[slot]
	if idx == 0 {
		if len(s.dl) < cap(s.dl) {
			s.dl = s.dl[:len(s.dl)+1] // reuse the entry and its bucket slice
		} else {
			s.dl = append(s.dl, pendingDelta{})
		}
		e := &s.dl[len(s.dl)-1]
		e.slot, e.buckets = int32(slot), e.buckets[:0]
		idx = uint32(len(s.dl))
		s.pend.s[slot] = idx
	}
	addPending(&s.dl[idx-1], j, n)
}

// addPending adds n to bucket j of e: most adds land in the newest bucket.
func addPending(e *pendingDelta, j int64, n uint64) {
	if k := len(e.buckets); k > 0 && e.buckets[k-1].Index == j {
		e.buckets[k-1].Count += n
		return
	}
	for i := range e.buckets {
		if e.buckets[i].Index == j {
			e.buckets[i].Count += n
			return
		}
	}
	e.buckets = append(e.buckets, Bucket{Index: j, Count: n})
}

// takePending removes and returns slot's pending buckets (a copy).
func (s *slab[C]) takePending(slot int) []Bucket {
	if !s.deltas || s.pend.s[slot] == 0 {
		return nil
	}
	e := &s.dl[s.pend.s[slot]-1]
	out := append([]Bucket(nil), e.buckets...)
	e.slot, e.buckets = -1, e.buckets[:0]
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
		s.dl[idx-1].slot = int32(slot)
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
	for i := range s.dl {
		e := &s.dl[i]
		if e.slot >= 0 && len(e.buckets) > 0 {
			dst = append(dst, Delta{Key: s.key(int(e.slot)), Spec: sp, Buckets: append([]Bucket(nil), e.buckets...)})
			s.pend.s[e.slot] = 0
		}
	}
	// The list is reused from drain to drain, but a burst's list (and the bucket slices
	// of its entries) goes once traffic falls: memory follows the live set.
	if drained := len(s.dl); cap(s.dl) > 64 && drained*4 < cap(s.dl) {
		s.dl = make([]pendingDelta, 0, drained*2)
	} else {
		s.dl = s.dl[:0]
	}
	return dst
}

// pendingOf returns a copy of slot's pending buckets.
func (s *slab[C]) pendingOf(slot int) []Bucket {
	if !s.deltas || s.pend.s[slot] == 0 {
		return nil
	}
	return append([]Bucket(nil), s.dl[s.pend.s[slot]-1].buckets...)
}
