package conformance

import "github.com/leapcount/leapcount/leaparray"

// Store is what Run drives: leaparray.Store's operations, each able to fail.
type Store interface {
	Incr(key string, sp leaparray.Spec, n, now int64) (int64, error)
	Count(key string, sp leaparray.Spec, now int64) (int64, error)
	Allow(key string, sp leaparray.Spec, limit, n, now int64) (leaparray.Decision, error)
	Reset(key string, sp leaparray.Spec, now int64) (bool, error)
	// Snapshot returns the counter's non-zero buckets within the window, oldest first.
	Snapshot(key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error)
	Merge(key string, sp leaparray.Spec, buckets []leaparray.Bucket, now int64) error
}

// Memory adapts an in-memory leaparray.Store.
func Memory(s *leaparray.Store) Store { return memory{s} }

type memory struct{ s *leaparray.Store }

func (m memory) Incr(key string, sp leaparray.Spec, n, now int64) (int64, error) {
	return m.s.Incr(key, sp, n, now), nil
}

func (m memory) Count(key string, sp leaparray.Spec, now int64) (int64, error) {
	return m.s.Count(key, sp, now), nil
}

func (m memory) Allow(key string, sp leaparray.Spec, limit, n, now int64) (leaparray.Decision, error) {
	return m.s.Allow(key, sp, limit, n, now), nil
}

func (m memory) Reset(key string, sp leaparray.Spec, now int64) (bool, error) {
	return m.s.Reset(key, sp, now), nil
}

func (m memory) Snapshot(key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	return m.s.Snapshot(key, sp, now), nil
}

func (m memory) Merge(key string, sp leaparray.Spec, buckets []leaparray.Bucket, _ int64) error {
	m.s.Merge(key, sp, buckets)
	return nil
}
