package leaparray

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
