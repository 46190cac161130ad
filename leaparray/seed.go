package leaparray

import "errors"

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
