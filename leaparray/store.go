package leaparray

import (
	"runtime"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Store is a keyed set of counters, safe for concurrent use. A counter is named by its
// key and Spec; each operation on one counter is atomic (one shard lock around the
// lookup and the ring update), so allow never admits past its limit.
//
// Memory follows the live set: Sweep forgets counters untouched for a whole window and
// slabs shrink as they empty. See slab.go for the layout.
type Store struct {
	tables *tableSet // its own object, for the cleanup that frees what it holds mapped
	cursor sweepCursor
	resets atomic.Uint64 // resets recorded so far (WithDeltas): see ResetMark
}

// Option configures a Store.
type Option func(*Store)

// WithDeltas makes the store keep what each counter gained since the last Drain, and
// which counters were reset, for write-behind persistence. It costs 4 bytes per counter,
// an 8-byte pending entry per counter with deltas that was held before the last Drain
// (one made since needs none: whole.go), and a map entry per counter reset since.
func WithDeltas() Option { return func(s *Store) { s.tables.deltas = true } }

// NewStore returns an empty store.
func NewStore(opts ...Option) *Store {
	s := &Store{tables: &tableSet{}}
	for _, o := range opts {
		o(s)
	}
	s.tables.init()
	runtime.AddCleanup(s, (*tableSet).free, s.tables)
	return s
}

func hashKey(key string) uint64 { return xxhash.Sum64String(key) }

// locked finds the counter's shard and runs fn under its lock. An unknown Spec runs
// nothing, unless m lets this call make its table (an error when a bounded call finds
// the store holding its most Specs). A shape that is not a valid Spec runs nothing (the
// contract's validation happens before the store; this guard only keeps a bad call
// from dividing by zero).
func (s *Store) locked(key string, sp Spec, m mode, fn func(sh *shard, h uint64, bucketMs int64)) error {
	for {
		t := s.tables.get(sp)
		if t == nil {
			if m == lookup || !validSpec(sp) {
				return nil
			}
			var err error
			if t, err = s.tables.getOrCreate(sp, m); err != nil {
				return err
			}
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
		return nil
	}
}

func validSpec(sp Spec) bool {
	_, err := MakeSpec(sp.WindowMs, sp.Buckets)
	return err == nil
}

// TryIncr adds n (n <= 0 adds nothing) at time now and returns the count afterwards,
// within the store's bounds: a counter it would have to create in a full store (after
// reclaiming idle ones) is not created, and it returns ErrFull or ErrTooManyShapes,
// having changed nothing. A store without bounds never fails it.
func (s *Store) TryIncr(key string, sp Spec, n, now int64) (int64, error) {
	return withRoom(s, now, func() (int64, error) { return s.incr(key, sp, n, now, bounded) })
}

func (s *Store) incr(key string, sp Spec, n, now int64, m mode) (int64, error) {
	var c uint64
	full := false
	err := s.locked(key, sp, m, func(sh *shard, h uint64, bucketMs int64) {
		r, j := sh.atCounting(key, h, floorDiv(now, bucketMs), m)
		if full = r.slot < 0; full {
			return
		}
		r = sh.widen(key, h, r, j, nonNeg(n))
		c = sh.incr(r, j, nonNeg(n))
	})
	return clampInt(c), fullErr(err, full)
}

func fullErr(err error, full bool) error {
	if full {
		return ErrFull
	}
	return err
}

// Count returns the count at time now; an unknown counter counts 0 and is not created.
func (s *Store) Count(key string, sp Spec, now int64) int64 {
	var c uint64
	s.locked(key, sp, lookup, func(sh *shard, h uint64, bucketMs int64) {
		if r, j := sh.at(key, h, floorDiv(now, bucketMs), lookup); r.slot >= 0 {
			c = sh.count(r, j)
		}
	})
	return clampInt(c)
}

// TryAllow adds n at time now if the count plus n stays within limit, and says what it
// did. A denied allow on an unknown counter does not create it. It creates a counter
// within the store's bounds only, failing as TryIncr does.
func (s *Store) TryAllow(key string, sp Spec, limit, n, now int64) (Decision, error) {
	return withRoom(s, now, func() (Decision, error) { return s.allow(key, sp, limit, n, now, bounded) })
}

func (s *Store) allow(key string, sp Spec, limit, n, now int64, m mode) (Decision, error) {
	lim, add := nonNeg(limit), nonNeg(n)
	// n alone over the limit is denied whatever the count: an unknown counter is
	// neither created nor needs its table.
	d := Decision{Remaining: clampInt(lim), RetryAfterMs: -1}
	if add > lim {
		m = lookup
	}
	full := false
	err := s.locked(key, sp, m, func(sh *shard, h uint64, bucketMs int64) {
		r, j := sh.atCounting(key, h, floorDiv(now, bucketMs), m)
		if r.slot < 0 {
			full = m != lookup
			return
		}
		r = sh.widen(key, h, r, j, add)
		if d = sh.allow(r, now, j, bucketMs, lim, add); d.Allowed {
			sh.noteAdd(r, j, add)
		}
	})
	if full || err != nil {
		return Decision{}, fullErr(err, full)
	}
	return d, nil
}

// TryReset forgets the counter and reports whether it existed at now: whether it was
// held and still in its window. A counter untouched for a whole window counts 0 and may
// already have been swept, so it reports false either way, whatever the sweep did.
//
// With WithDeltas it also records the reset, held counter or not (its state may live
// only in Redis), and drops what was pending: the next Drain gives the counter one
// Delta with Reset set and only what was added after the reset. Recording it adds the
// counter's Spec to the store within its bounds only: a reset of an unknown Spec in a
// store that holds its most Specs fails with ErrTooManyShapes.
func (s *Store) TryReset(key string, sp Spec, now int64) (bool, error) {
	return s.reset(key, sp, now, bounded)
}

func (s *Store) reset(key string, sp Spec, now int64, m mode) (bool, error) {
	if !s.tables.deltas {
		m = lookup // nothing to record: an unknown Spec holds nothing to forget
	}
	existed := false
	err := s.locked(key, sp, m, func(sh *shard, h uint64, bucketMs int64) {
		if r, ok := sh.find(key, h); ok {
			existed = sh.headOf(r).bucket > floorDiv(now, bucketMs)-int64(sp.Buckets)
			sh.remove(r, h) // and its pending adds: the reset erases them
		}
		if sh.noteReset(key) {
			s.resets.Add(1) // under the shard's lock: see TrySeed
		}
	})
	return existed, err
}

// Snapshot returns the counter's buckets within the window at now, oldest first (nil if
// the counter is unknown).
func (s *Store) Snapshot(key string, sp Spec, now int64) []Bucket {
	var out []Bucket
	s.locked(key, sp, lookup, func(sh *shard, h uint64, bucketMs int64) {
		if r, j := sh.at(key, h, floorDiv(now, bucketMs), lookup); r.slot >= 0 {
			out = windowBuckets(sh.buckets(nil, r), j, sp.Buckets)
		}
	})
	return out
}

// Merge adds buckets to the counter bucket by bucket, creating it if needed, whatever
// the store's bounds (it takes in state handed over from elsewhere: see Admits).
// Buckets older than the counter's window at its head are dropped: they count for
// nothing. With WithDeltas what is merged is not pending: where the deltas go has it
// already. So with a reset of the counter pending (ResetPending), which erases it there,
// the caller makes what it merged pending too (AddPending), as an owner does with a
// handed-in counter's pending part.
func (s *Store) Merge(key string, sp Spec, buckets []Bucket) {
	if len(buckets) == 0 {
		return
	}
	s.locked(key, sp, admit, func(sh *shard, h uint64, _ int64) {
		r, _ := sh.at(key, h, newestBucket(buckets), admit)
		sh.materialize(r) // what is merged is not pending
		for _, b := range buckets {
			r = sh.widen(key, h, r, b.Index, b.Count)
			sh.add(r, b.Index, b.Count)
		}
	})
}

// Has reports whether the counter is held.
func (s *Store) Has(key string, sp Spec) bool {
	held := false
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		_, held = sh.find(key, h)
	})
	return held
}

// Len is the number of counters held.
func (s *Store) Len() int {
	n := 0
	s.eachShard(func(_ *table, sh *shard) { n += sh.len() })
	return n
}

// eachShard calls fn with every shard of every table, one at a time, under its lock.
func (s *Store) eachShard(fn func(t *table, sh *shard)) {
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			fn(t, sh)
			sh.mu.Unlock()
		}
	}
}

// at finds key's counter and the bucket an operation at bucket j acts at:
// max(j, head). It makes a missing counter (head j) if m lets it (see shard.create);
// a missing counter it does not make gives slot −1.
func (sh *shard) at(key string, h uint64, j int64, m mode) (ref, int64) {
	if r, ok := sh.find(key, h); ok {
		return r, max(j, sh.headOf(r).bucket)
	}
	r, _ := sh.create(key, h, j, m)
	return r, j
}

func nonNeg(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}
