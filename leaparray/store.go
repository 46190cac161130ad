package leaparray

import "github.com/cespare/xxhash/v2"

// Store is a keyed set of counters, safe for concurrent use. A counter is named by its
// key and Spec; each operation on one counter is atomic (one shard lock around the
// lookup and the ring update), so allow never admits past its limit.
//
// Memory follows the live set: Sweep forgets counters untouched for a whole window and
// slabs shrink as they empty. See slab.go for the layout.
type Store struct {
	tables tableSet
	cursor sweepCursor
}

// Option configures a Store.
type Option func(*Store)

// WithDeltas makes the store keep what each counter gained since the last Drain, and
// which counters were reset, for write-behind persistence. It costs 4 bytes per counter,
// the pending entries, and a map entry per counter reset since the last Drain.
func WithDeltas() Option { return func(s *Store) { s.tables.deltas = true } }

// NewStore returns an empty store.
func NewStore(opts ...Option) *Store {
	s := &Store{}
	for _, o := range opts {
		o(s)
	}
	s.tables.init()
	return s
}

func hashKey(key string) uint64 { return xxhash.Sum64String(key) }

// locked finds the counter's shard and runs fn under its lock. With create false an
// unknown Spec runs nothing and returns false. A shape that is not a valid Spec runs
// nothing (the contract's validation happens before the store; this guard only keeps a
// bad call from dividing by zero).
func (s *Store) locked(key string, sp Spec, create bool, fn func(sh *shard, h uint64, bucketMs int64)) bool {
	for {
		t := s.tables.get(sp)
		if t == nil {
			if !create || !validSpec(sp) {
				return false
			}
			t = s.tables.getOrCreate(sp)
		}
		h := hashKey(key)
		sh := t.shard(h)
		sh.mu.Lock()
		if t.dead { // removed by Sweep after we found it: look again
			sh.mu.Unlock()
			continue
		}
		fn(sh, h, t.bucketMs)
		sh.mu.Unlock()
		return true
	}
}

func validSpec(sp Spec) bool {
	_, err := MakeSpec(sp.WindowMs, sp.Buckets)
	return err == nil
}

// Incr adds n (n <= 0 adds nothing) at time now and returns the count afterwards.
func (s *Store) Incr(key string, sp Spec, n, now int64) int64 {
	var c uint64
	s.locked(key, sp, true, func(sh *shard, h uint64, bucketMs int64) {
		r, j := sh.at(key, h, floorDiv(now, bucketMs), true)
		r = sh.widen(key, h, r, j, nonNeg(n))
		c = sh.incr(r, j, nonNeg(n))
	})
	return clampInt(c)
}

// Count returns the count at time now; an unknown counter counts 0 and is not created.
func (s *Store) Count(key string, sp Spec, now int64) int64 {
	var c uint64
	s.locked(key, sp, false, func(sh *shard, h uint64, bucketMs int64) {
		if r, j := sh.at(key, h, floorDiv(now, bucketMs), false); r.slot >= 0 {
			c = sh.count(r, j)
		}
	})
	return clampInt(c)
}

// Allow adds n at time now if the count plus n stays within limit, and says what it did.
// A denied allow on an unknown counter does not create it.
func (s *Store) Allow(key string, sp Spec, limit, n, now int64) Decision {
	var d Decision
	lim, add := nonNeg(limit), nonNeg(n)
	s.locked(key, sp, true, func(sh *shard, h uint64, bucketMs int64) {
		j := floorDiv(now, bucketMs)
		r, j := sh.at(key, h, j, add <= lim)
		if r.slot < 0 { // unknown, and n alone is over the limit
			d = allowAt(&head{bucket: j}, []uint64(nil), now, j, bucketMs, lim, add)
			return
		}
		r = sh.widen(key, h, r, j, add)
		if d = sh.allow(r, now, j, bucketMs, lim, add); d.Allowed {
			sh.noteAdd(r, j, add)
		}
	})
	return d
}

// Reset forgets the counter and reports whether it existed at now: whether it was held
// and still in its window. A counter untouched for a whole window counts 0 and may
// already have been swept, so it reports false either way, whatever the sweep did.
//
// With WithDeltas it also records the reset, held counter or not (its state may live
// only in Redis), and drops what was pending: the next Drain gives the counter one
// Delta with Reset set and only what was added after the reset.
func (s *Store) Reset(key string, sp Spec, now int64) bool {
	existed := false
	s.locked(key, sp, s.tables.deltas, func(sh *shard, h uint64, bucketMs int64) {
		if r, ok := sh.find(key, h); ok {
			existed = sh.headOf(r).bucket > floorDiv(now, bucketMs)-int64(sp.Buckets)
			sh.remove(r, h) // and its pending adds: the reset erases them
		}
		sh.noteReset(key)
	})
	return existed
}

// Snapshot returns the counter's buckets within the window at now, oldest first (nil if
// the counter is unknown).
func (s *Store) Snapshot(key string, sp Spec, now int64) []Bucket {
	var out []Bucket
	s.locked(key, sp, false, func(sh *shard, h uint64, bucketMs int64) {
		if r, j := sh.at(key, h, floorDiv(now, bucketMs), false); r.slot >= 0 {
			out = windowBuckets(sh.buckets(nil, r), j, sp.Buckets)
		}
	})
	return out
}

// Merge adds buckets to the counter bucket by bucket, creating it if needed. Buckets
// older than the counter's window at its head are dropped: they count for nothing.
func (s *Store) Merge(key string, sp Spec, buckets []Bucket) {
	if len(buckets) == 0 {
		return
	}
	s.locked(key, sp, true, func(sh *shard, h uint64, _ int64) {
		r, _ := sh.at(key, h, newestBucket(buckets), true)
		for _, b := range buckets {
			r = sh.widen(key, h, r, b.Index, b.Count)
			sh.add(r, b.Index, b.Count)
		}
	})
}

// Len is the number of counters held.
func (s *Store) Len() int {
	n := 0
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			n += sh.len()
			sh.mu.Unlock()
		}
	}
	return n
}

// at finds key's counter and the bucket an operation at bucket j acts at:
// max(j, head). With create it makes a missing counter (head j); without, a missing
// counter gives slot −1.
func (sh *shard) at(key string, h uint64, j int64, create bool) (ref, int64) {
	r, ok := sh.find(key, h)
	switch {
	case ok:
		return r, max(j, sh.headOf(r).bucket)
	case create:
		return sh.create(key, h, j), j
	}
	return ref{slot: -1}, j
}

func nonNeg(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}
