package leaparray

// The unbounded operations the package's tests use: Incr, Allow and Reset as TryIncr,
// TryAllow and TryReset, but creating the counter (or, for Reset with WithDeltas,
// recording its Spec) whatever the store's bounds, as Merge and Seed do. Production
// calls only the bounded ones; on a store without bounds the two are the same.

// Incr adds n (n <= 0 adds nothing) at time now and returns the count afterwards.
func (s *Store) Incr(key string, sp Spec, n, now int64) int64 {
	c, _ := s.incr(key, sp, n, now, admit)
	return c
}

// Allow adds n at time now if the count plus n stays within limit, and says what it did.
func (s *Store) Allow(key string, sp Spec, limit, n, now int64) Decision {
	d, _ := s.allow(key, sp, limit, n, now, admit)
	return d
}

// Reset forgets the counter and reports whether it existed at now.
func (s *Store) Reset(key string, sp Spec, now int64) bool {
	existed, _ := s.reset(key, sp, now, admit)
	return existed
}
