package leaparray

import "errors"

// Evicted is a counter taken out of the store: its buckets, and what of them was still
// pending write-behind (with WithDeltas): a reset not yet drained, and what was added
// after it.
type Evicted struct {
	Key     string
	Spec    Spec
	Buckets []Bucket // every bucket the counter held, oldest first
	Pending []Bucket // the part of Buckets not yet drained (added after Reset, if set)
	Reset   bool     // reset since the last drain: its persisted state is to be erased
}

// Drain appends to dst what happened to every counter since the last Drain, and forgets
// it: one Delta per counter that was added to or reset. Without WithDeltas it appends
// nothing.
func (s *Store) Drain(dst []Delta) []Delta {
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			dst = sh.drain(dst, t.spec)
			sh.mu.Unlock()
		}
	}
	return dst
}

// evictBatch bounds the slots one lock hold of Evict looks at, so that ops on a shard
// wait at most that long for a ring change: one lock hold per shard stalled them on a
// large store (BenchmarkIncrDuringRingChange in package owner).
const evictBatch = 256

// Evict removes every counter whose key match accepts and returns them, with the resets
// not yet drained of matching counters that are not held (as an Evicted with Reset set
// and no buckets). It locks each shard for at most evictBatch slots at a time. match
// must not keep the key it is given: it is a view of the store's memory.
func (s *Store) Evict(match func(key string) bool) []Evicted {
	var out []Evicted
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			out = evictAll(out, sh, &sh.wide, wide, t.spec, match)
			out = evictAll(out, sh, &sh.narrow, narrow, t.spec, match)
			out = evictAll(out, sh, &sh.one, one, t.spec, match)
			sh.mu.Lock()
			for key := range sh.resets { // those left are of counters not held
				if match(key) {
					out = append(out, Evicted{Key: key, Spec: t.spec, Reset: true})
					delete(sh.resets, key)
				}
			}
			sh.mu.Unlock()
		}
	}
	return out
}

// evictAll walks a slab's slots from the last down, evictBatch at a time under the
// shard's lock. Walking down is what makes releasing the lock safe: remove moves the
// last counter into a freed slot, and every counter above the walk has been looked at
// already (a counter added meanwhile lands above it too, and is of a key this Evict
// does not want, since the caller stopped deciding those).
func evictAll[C count](out []Evicted, sh *shard, s *slab[C], tr tier, sp Spec, match func(string) bool) []Evicted {
	// A batch goes to out after the lock is released: growing out copies all it holds,
	// which at a million counters takes milliseconds no op should wait for.
	batch := make([]Evicted, 0, evictBatch)
	for next := -1; ; {
		batch = batch[:0]
		sh.mu.Lock()
		if next < 0 || next >= len(s.refs.s) {
			next = len(s.refs.s) - 1
		}
		stop := max(next-evictBatch, -1)
		for ; next > stop; next-- {
			if !match(s.keyView(next)) {
				continue
			}
			key := s.key(next)
			ev := Evicted{Key: key, Spec: sp, Buckets: s.appendBuckets(nil, next), Pending: s.takePending(next),
				Reset: sh.takeReset(key)}
			sh.remove(ref{tier: tr, slot: next}, hashKey(key))
			batch = append(batch, ev)
		}
		sh.mu.Unlock()
		out = append(out, batch...)
		if next < 0 {
			return out
		}
	}
}

// Seed creates the counter from buckets if it is not held, and reports whether it did.
// Nothing seeded is pending: it is state loaded from elsewhere, not new adds. It creates
// the counter whatever the store's bounds (it takes in state handed over from
// elsewhere: see Admits); TrySeed respects them.
func (s *Store) Seed(key string, sp Spec, buckets []Bucket) bool {
	created, _ := s.seed(key, sp, buckets, admit, nil)
	return created
}

// TrySeed is Seed within the store's bounds, for state loaded from Redis because a
// client asked for the counter: in a full store (after reclaiming counters idle at now)
// it creates nothing and returns ErrFull or ErrTooManyShapes. mark is ResetMark as it
// was when the load began: if any counter was reset since (WithDeltas), the loaded
// state may predate a reset of this one and must not come back to life, so TrySeed
// creates nothing and returns ErrResetSince. The check and the creation are one step
// under the counter's lock, which its reset takes too.
func (s *Store) TrySeed(key string, sp Spec, buckets []Bucket, now int64, mark uint64) (bool, error) {
	return withRoom(s, now, func() (bool, error) {
		return s.seed(key, sp, buckets, bounded, func() bool { return s.resets.Load() != mark })
	})
}

// ResetMark is how many resets the store has recorded: take it before loading a
// counter's state from elsewhere, and give it to TrySeed.
func (s *Store) ResetMark() uint64 { return s.resets.Load() }

// ErrResetSince is TrySeed's refusal of state loaded before a reset.
var ErrResetSince = errors.New("leaparray: a counter was reset while this one was loaded")

// seed creates the counter from buckets unless it is held, within m's bounds. A
// non-nil stale, called under the counter's lock, refuses the creation when it says so
// (ErrResetSince).
func (s *Store) seed(key string, sp Spec, buckets []Bucket, m mode, stale func() bool) (bool, error) {
	if len(buckets) == 0 {
		return false, nil
	}
	created, full, refused := false, false, false
	err := s.locked(key, sp, m, func(sh *shard, h uint64, _ int64) {
		if refused = stale != nil && stale(); refused {
			return
		}
		if _, ok := sh.find(key, h); ok {
			return
		}
		r, ok := sh.create(key, h, newestBucket(buckets), m)
		if full = !ok; full {
			return
		}
		for _, b := range buckets {
			r = sh.widen(key, h, r, b.Index, b.Count)
			sh.add(r, b.Index, b.Count)
		}
		created = true
	})
	if refused {
		return false, ErrResetSince
	}
	return created, fullErr(err, full)
}

// AddPending records buckets (and, with reset, a reset ahead of everything pending) as
// pending write-behind of a held counter, without changing its counts, and reports
// whether the counter is held. A node that takes over a counter with the part its last
// owner had not yet persisted calls Seed, then AddPending with that part. Without
// WithDeltas it records nothing.
func (s *Store) AddPending(key string, sp Spec, buckets []Bucket, reset bool) bool {
	held := false
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		r, ok := sh.find(key, h)
		if !ok {
			return
		}
		held = true
		for _, b := range buckets {
			sh.noteAdd(r, b.Index, b.Count)
		}
		if reset {
			sh.noteReset(key)
		}
	})
	return held
}

// Has reports whether the counter is held.
func (s *Store) Has(key string, sp Spec) bool {
	held := false
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		_, held = sh.find(key, h)
	})
	return held
}

// ResetPending reports whether a reset of the counter is recorded and not yet drained
// (by Drain, or taken by Evict): its persisted state is about to be erased, so a node
// must not load that state back. Without WithDeltas it is always false.
func (s *Store) ResetPending(key string, sp Spec) bool {
	pending := false
	s.locked(key, sp, lookup, func(sh *shard, _ uint64, _ int64) {
		_, pending = sh.resets[key]
	})
	return pending
}

// Pending returns the counter's buckets not yet drained (a copy; nil when it is not
// held or nothing is pending), and whether a reset of it is not yet drained.
func (s *Store) Pending(key string, sp Spec) (buckets []Bucket, reset bool) {
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		_, reset = sh.resets[key]
		r, ok := sh.find(key, h)
		if !ok {
			return
		}
		switch r.tier {
		case one:
			buckets = sh.one.pendingOf(r.slot)
		case narrow:
			buckets = sh.narrow.pendingOf(r.slot)
		default:
			buckets = sh.wide.pendingOf(r.slot)
		}
	})
	return buckets, reset
}

// Bases calls fn with every counter held whose key match accepts, and its buckets
// without what is pending of them (WithDeltas): what a persistence store held of it
// before it lost its data, when every delta drained so far reached it. Written back,
// base and the deltas still to drain make the counter whole again. It locks one shard
// at a time. match must not keep the key it is given: it is a view of the store's
// memory.
func (s *Store) Bases(match func(key string) bool, fn func(key string, sp Spec, base []Bucket)) {
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			basesOf(&sh.one, t.spec, match, fn)
			basesOf(&sh.narrow, t.spec, match, fn)
			basesOf(&sh.wide, t.spec, match, fn)
			sh.mu.Unlock()
		}
	}
}

func basesOf[C count](s *slab[C], sp Spec, match func(string) bool, fn func(string, Spec, []Bucket)) {
	for slot := range s.refs.s {
		if match(s.keyView(slot)) {
			fn(s.key(slot), sp, subtract(s.appendBuckets(nil, slot), s.pendingOf(slot)))
		}
	}
}

// subtract takes pending out of buckets, bucket by bucket, dropping those left empty.
func subtract(buckets, pending []Bucket) []Bucket {
	out := buckets[:0]
	for _, b := range buckets {
		for _, p := range pending {
			if p.Index == b.Index {
				b.Count -= min(p.Count, b.Count)
			}
		}
		if b.Count > 0 {
			out = append(out, b)
		}
	}
	return out
}

// DrainMatching is Drain for the counters (held or not) whose key match accepts: what
// happened to them since the last drain, as one Delta each, forgotten here. match must
// not keep the key it is given: it is a view of the store's memory.
func (s *Store) DrainMatching(match func(key string) bool, dst []Delta) []Delta {
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			from := len(dst)
			dst = drainMatching(&sh.one, t.spec, match, dst)
			dst = drainMatching(&sh.narrow, t.spec, match, dst)
			dst = drainMatching(&sh.wide, t.spec, match, dst)
			for k := from; k < len(dst); k++ {
				dst[k].Reset = sh.takeReset(dst[k].Key)
			}
			for key := range sh.resets {
				if match(key) {
					dst = append(dst, Delta{Key: key, Spec: t.spec, Reset: true})
					delete(sh.resets, key)
				}
			}
			sh.mu.Unlock()
		}
	}
	return dst
}

func drainMatching[C count](s *slab[C], sp Spec, match func(string) bool, dst []Delta) []Delta {
	if !s.deltas {
		return dst
	}
	for slot := range s.refs.s {
		if s.pend.s[slot] != 0 && match(s.keyView(slot)) {
			dst = append(dst, Delta{Key: s.key(slot), Spec: sp, Buckets: s.takePending(slot)})
		}
	}
	return dst
}
