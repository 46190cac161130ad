package leaparray

import "math"

// Deltas: what was added to counters since the last Drain, kept only by a store made
// with WithDeltas (a node that persists to Redis writes them behind). A slab keeps, per
// slot, 1 + the index of the slot's entry in dl (0: nothing pending), and the entries in
// a list reused from drain to drain, so steady write-behind allocates nothing here. An
// entry holds its first bucket and is pointer-free, so that the list is a vec (mapped
// once large, outside the collector's heap), 8 bytes each; a counter made since the last
// drain needs none, only a mark (whole.go). The first bucket is packed in 32 bits: its index
// relative to the slab's pendBase in 12 (signed) and its count in 19, which nearly
// every flush interval's adds fit; a counter with more than one bucket pending, or one
// that does not fit, keeps them in the slab's more, by slot (each bucket in one place:
// the first, or more), and the entry's last bit says so.

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
	first uint32 // its first bucket: firstMore | index less pendBase | count; 0: none
}

// The bits of pendingDelta.first.
const (
	countBits  = 19
	indexBits  = 12
	firstCount = 1<<countBits - 1 // the count's bits, and the largest count kept there
	firstMore  = 1 << 31          // the counter has buckets in the slab's more
	minFirst   = -1 << (indexBits - 1)
	maxFirst   = 1<<(indexBits-1) - 1
)

// count is the first bucket's count; 0: none there.
func (e *pendingDelta) count() uint32 { return e.first & firstCount }

// index is the first bucket's index less pendBase.
func (e *pendingDelta) index() int64 { return int64(int32(e.first<<1) >> (countBits + 1)) }

// hasMore reports whether the counter has buckets in the slab's more.
func (e *pendingDelta) hasMore() bool { return e.first&firstMore != 0 }

// holds reports whether e has anything pending.
func (e *pendingDelta) holds() bool { return e.first != 0 }

// noteAdd records n added to bucket j of slot.
func (s *slab[C]) noteAdd(slot int, j int64, n uint64) {
	if !s.deltas || n == 0 {
		return
	}
	idx := s.pend.s[slot]
	if idx == wholeRing { // the add is in its ring, all of which is pending
		return
	}
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
	c := e.count()
	switch {
	case e.first == 0 && off >= minFirst && off <= maxFirst && n <= firstCount:
		e.first |= uint32(off)<<countBits&^firstMore | uint32(n)
		return
	case c != 0 && e.index() == off && uint64(c)+n <= firstCount:
		e.first += uint32(n) // the sum fits the count's bits: nothing carries into the index
		return
	}
	if s.more == nil {
		s.more = map[int32][]Bucket{}
	}
	bs := s.more[e.slot]
	if c != 0 && e.index() == off { // its count outgrows the first bucket: it moves to more
		bs = append(bs, Bucket{Index: j, Count: uint64(c)})
		e.first &= firstMore
	}
	e.first |= firstMore
	for i := range bs {
		if bs[i].Index == j {
			bs[i].Count += n
			s.more[e.slot] = bs
			return
		}
	}
	s.more[e.slot] = append(bs, Bucket{Index: j, Count: n})
}

// bucketsOf returns a copy of e's pending buckets (nil: none).
func (s *slab[C]) bucketsOf(e *pendingDelta) []Bucket {
	var more []Bucket
	if e.hasMore() {
		more = s.more[e.slot]
	}
	c := e.count()
	if c == 0 && len(more) == 0 {
		return nil
	}
	out := make([]Bucket, 0, len(more)+1)
	if c != 0 {
		out = append(out, Bucket{Index: s.pendBase + e.index(), Count: uint64(c)})
	}
	return append(out, more...)
}

// clearEntry forgets what e holds pending.
func (s *slab[C]) clearEntry(e *pendingDelta) {
	if e.hasMore() {
		delete(s.more, e.slot)
	}
	e.first = 0
}

// takePending removes and returns slot's pending buckets (a copy).
func (s *slab[C]) takePending(slot int) []Bucket {
	if !s.deltas || s.pend.s[slot] == 0 {
		return nil
	}
	if s.isWhole(slot) {
		s.clearWhole(slot)
		return s.appendBuckets(nil, slot)
	}
	e := &s.dl.s[s.pend.s[slot]-1]
	out := s.bucketsOf(e)
	s.dropEntry(slot)
	return out
}

// dropPending forgets slot's pending buckets.
func (s *slab[C]) dropPending(slot int) {
	switch {
	case !s.deltas || s.pend.s[slot] == 0:
	case s.isWhole(slot):
		s.clearWhole(slot)
	default:
		s.dropEntry(slot)
	}
}

// dropEntry lets go of slot's entry.
func (s *slab[C]) dropEntry(slot int) {
	e := &s.dl.s[s.pend.s[slot]-1]
	s.clearEntry(e)
	e.slot = -1
	s.pend.s[slot] = 0
}

// movePending follows a counter moved from slot last to slot (by remove), whose ring
// is already there. A mark that would sit below fresh becomes an entry.
func (s *slab[C]) movePending(last, slot int) {
	if !s.deltas {
		return
	}
	s.pend.s[slot] = s.pend.s[last]
	if s.isWhole(slot) {
		if slot < s.fresh {
			s.materialize(slot)
		}
		return
	}
	if idx := s.pend.s[slot]; idx != 0 {
		e := &s.dl.s[idx-1]
		if e.hasMore() {
			s.more[int32(slot)] = s.more[int32(last)]
			delete(s.more, int32(last))
		}
		e.slot = int32(slot)
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
	dst, _ = s.drainWhole(dst, sp, len(s.refs.s), math.MaxInt)
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
	s.more = nil
}

// pendingOf returns a copy of slot's pending buckets.
func (s *slab[C]) pendingOf(slot int) []Bucket {
	if !s.deltas || s.pend.s[slot] == 0 {
		return nil
	}
	if s.isWhole(slot) {
		return s.appendBuckets(nil, slot)
	}
	return s.bucketsOf(&s.dl.s[s.pend.s[slot]-1])
}

// drainQuota is what a pass of DrainSome may take of one slab: the first entries of its
// pending list, and the marked counters below until, as they were when it reached the
// shard.
type drainQuota struct{ entries, until int }

// drainSome is drain for at most max counters, of those within quota: it reports
// whether the quota is used up, and then, as drain does, appends the resets still
// recorded.
func (sh *shard) drainSome(dst []Delta, sp Spec, quota *[3]drainQuota, max int) ([]Delta, bool) {
	from := len(dst)
	dst, quota[0] = sh.one.drainSome(dst, sp, quota[0], max)
	dst, quota[1] = sh.narrow.drainSome(dst, sp, quota[1], max-(len(dst)-from))
	dst, quota[2] = sh.wide.drainSome(dst, sp, quota[2], max-(len(dst)-from))
	for i := from; i < len(dst) && len(sh.resets) > 0; i++ {
		dst[i].Reset = sh.takeReset(dst[i].Key)
	}
	if *quota != [3]drainQuota{} {
		return dst, false
	}
	for key := range sh.resets {
		dst = append(dst, Delta{Key: key, Spec: sp, Reset: true})
	}
	sh.resets = nil
	return dst, true
}

// quota is what a pass reaching the slab now may take of it.
func (s *slab[C]) quota() drainQuota { return drainQuota{entries: len(s.dl.s), until: len(s.refs.s)} }

// drainSome takes up to max counters' deltas within q, the marked counters first, and
// returns what is left of it.
func (s *slab[C]) drainSome(dst []Delta, sp Spec, q drainQuota, max int) ([]Delta, drainQuota) {
	dst, taken := s.drainWhole(dst, sp, q.until, max)
	if s.fresh >= min(q.until, len(s.refs.s)) {
		q.until = 0
	}
	dst, q.entries = s.drainEntries(dst, sp, q.entries, max-taken)
	return dst, q
}

// drainEntries takes up to max counters' deltas from the first quota entries of the
// pending list and returns what is left of the quota. The entries not taken move to the
// front, in order, so that the next part starts with them.
func (s *slab[C]) drainEntries(dst []Delta, sp Spec, quota, max int) ([]Delta, int) {
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
