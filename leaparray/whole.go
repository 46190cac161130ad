package leaparray

import "math"

// Whole-ring counters: a counter that a count created since the last drain holds
// nothing but what was added here, so its whole ring is what is pending. It keeps no
// entry in the pending list (delta.go), only a mark in its pend slot: a key flood
// waiting to be written costs the 4-byte slot and nothing more
// (TestPendingFloodCostsFewBytesACounter). Insert appends, so every such counter sits
// at or above the slab's fresh slot, and a drain looks at the slots from fresh on, not
// at the whole slab.
//
// The mark holds while the ring changes only by counted adds. Anything else turns it
// into an ordinary entry first (materialize): a merge or a take, which change the ring
// without being pending, and a move below fresh by remove. A bucket the ring lets go
// of as its head moves on leaves what is pending too: it had left the window, and
// counts for nothing wherever it is written.

// wholeRing is the pend mark of a counter whose whole ring is pending.
const wholeRing = math.MaxUint32

// isWhole reports whether slot's whole ring is pending.
func (s *slab[C]) isWhole(slot int) bool { return s.deltas && s.pend.s[slot] == wholeRing }

// markWhole marks slot, a counter just made by a count or moved from another slab with
// its mark, as pending whole. One below fresh gets an entry with its ring instead.
func (s *slab[C]) markWhole(slot int) {
	if !s.deltas || s.pend.s[slot] != 0 {
		return
	}
	if slot < s.fresh {
		s.noteRing(slot)
		return
	}
	s.pend.s[slot] = wholeRing
	s.whole++
}

func (s *slab[C]) clearWhole(slot int) {
	s.pend.s[slot] = 0
	s.whole--
}

// materialize turns slot's mark, if it has one, into an entry holding its ring.
func (s *slab[C]) materialize(slot int) {
	if s.isWhole(slot) {
		s.clearWhole(slot)
		s.noteRing(slot)
	}
}

// noteRing records slot's ring as pending in an entry.
func (s *slab[C]) noteRing(slot int) {
	var buf [8]Bucket
	for _, b := range s.appendBuckets(buf[:0], slot) {
		s.noteAdd(slot, b.Index, b.Count)
	}
}

// drainWhole appends the deltas of the marked counters from fresh up to until (at most
// most with buckets; a counter whose ring emptied gives none), clearing their marks, and
// moves fresh past the slots it looked at. It reports how many it appended.
func (s *slab[C]) drainWhole(dst []Delta, sp Spec, until, most int) ([]Delta, int) {
	until = min(until, len(s.refs.s))
	if s.whole == 0 {
		s.fresh = max(s.fresh, until)
		return dst, 0
	}
	taken := 0
	for ; s.fresh < until && taken < most; s.fresh++ {
		if !s.isWhole(s.fresh) {
			continue
		}
		s.clearWhole(s.fresh)
		if bs := s.appendBuckets(nil, s.fresh); len(bs) > 0 {
			dst = append(dst, Delta{Key: s.key(s.fresh), Spec: sp, Buckets: bs})
			taken++
		}
	}
	return dst, taken
}

// marks is what a shard asks of any of its slabs about marks, whatever its count type.
type marks interface {
	markWhole(slot int)
	materialize(slot int)
}

// marksOf is the slab r is in.
func (sh *shard) marksOf(r ref) marks {
	switch r.tier {
	case one:
		return &sh.one
	case narrow:
		return &sh.narrow
	}
	return &sh.wide
}

// markWhole marks r, see slab.markWhole.
func (sh *shard) markWhole(r ref) { sh.marksOf(r).markWhole(r.slot) }

// materialize turns r's mark into an entry, see slab.materialize.
func (sh *shard) materialize(r ref) { sh.marksOf(r).materialize(r.slot) }

// atCounting is at for a count: a counter it makes is pending whole.
func (sh *shard) atCounting(key string, h uint64, j int64, m mode) (ref, int64) {
	if r, ok := sh.find(key, h); ok {
		return r, max(j, sh.headOf(r).bucket)
	}
	r, ok := sh.create(key, h, j, m)
	if ok {
		sh.one.markWhole(r.slot)
	}
	return r, j
}
