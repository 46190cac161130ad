package conformance

import "github.com/leapcount/leapcount/leaparray"

// Store is what Run drives: leaparray.Store's operations (TryIncr, Count, TryAllow,
// TryReset, Snapshot, Merge), each able to fail.
type Store interface {
	Incr(key string, sp leaparray.Spec, n, now int64) (int64, error)
	Count(key string, sp leaparray.Spec, now int64) (int64, error)
	Allow(key string, sp leaparray.Spec, limit, n, now int64) (leaparray.Decision, error)
	Reset(key string, sp leaparray.Spec, now int64) (bool, error)
	// Snapshot returns the counter's non-zero buckets within the window, oldest first.
	Snapshot(key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error)
	Merge(key string, sp leaparray.Spec, buckets []leaparray.Bucket, now int64) error
}

// Memory adapts an in-memory leaparray.Store. Made without bounds, its bounded
// operations never fail.
func Memory(s *leaparray.Store) Store { return memory{s} }

type memory struct{ s *leaparray.Store }

func (m memory) Incr(key string, sp leaparray.Spec, n, now int64) (int64, error) {
	return m.s.TryIncr(key, sp, n, now)
}

func (m memory) Count(key string, sp leaparray.Spec, now int64) (int64, error) {
	return m.s.Count(key, sp, now), nil
}

func (m memory) Allow(key string, sp leaparray.Spec, limit, n, now int64) (leaparray.Decision, error) {
	return m.s.TryAllow(key, sp, limit, n, now)
}

func (m memory) Reset(key string, sp leaparray.Spec, now int64) (bool, error) {
	return m.s.TryReset(key, sp, now)
}

func (m memory) Snapshot(key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	return m.s.Snapshot(key, sp, now), nil
}

func (m memory) Merge(key string, sp leaparray.Spec, buckets []leaparray.Bucket, _ int64) error {
	m.s.Merge(key, sp, buckets)
	return nil
}
