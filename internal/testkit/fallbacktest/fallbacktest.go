// Package fallbacktest puts counts in Redis and reads them back through a
// fallback.Store's production paths, for the tests of the packages above fallback:
// Count reads a counter as a new owner loads it, Add writes one as write-behind merges
// it. (Package fallback's own tests have per-operation scripts of their own.)
package fallbacktest

import (
	"context"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
)

// Count is the counter's count in Redis at now: the sum of the buckets a new owner would
// load (fallback.Store.Load); an unknown counter counts 0.
func Count(ctx context.Context, st *fallback.Store, key string, sp leaparray.Spec, now int64) (int64, error) {
	bs, err := st.Load(ctx, key, sp, now)
	var n int64
	for _, b := range bs {
		n += int64(b.Count)
	}
	return n, err
}

// Add adds n to the counter in Redis, in the bucket of now, as another owner's
// write-behind would (fallback.Store.Merge).
func Add(ctx context.Context, st *fallback.Store, key string, sp leaparray.Spec, n, now int64) error {
	return st.Merge(ctx, key, sp, []leaparray.Bucket{{Index: sp.Bucket(now), Count: uint64(n)}}, now)
}
