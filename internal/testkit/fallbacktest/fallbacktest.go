// Package fallbacktest puts counts in Redis and reads them back through a
// fallback.Store's production paths, for the tests of the packages above fallback:
// Load and Count read a counter as a new owner loads it (LoadMany), Add writes one as
// write-behind does (a Batch). (Package fallback's own tests have per-operation scripts
// of their own.)
package fallbacktest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
)

// Load returns the counter's buckets in Redis within the window at now, as a new owner
// loads them (fallback.Store.LoadMany); nil for an unknown counter.
func Load(ctx context.Context, st *fallback.Store, key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	l := st.LoadMany(ctx, []fallback.CounterRef{{Key: key, Spec: sp}}, now)[0]
	return l.Buckets, l.Err
}

// Count is the counter's count in Redis at now: the sum of the buckets Load returns; an
// unknown counter counts 0.
func Count(ctx context.Context, st *fallback.Store, key string, sp leaparray.Spec, now int64) (int64, error) {
	bs, err := Load(ctx, st, key, sp, now)
	var n int64
	for _, b := range bs {
		n += int64(b.Count)
	}
	return n, err
}

// writers makes each Add a writer of its own: a Store's seqs start again with each
// Store, and a writer name used before would find its calls below its high-water mark
// and skip them as applied.
var writers atomic.Uint64

// Add adds n to the counter in Redis, in the bucket of now, as another owner's
// write-behind would (a fallback.Batch, sent until Redis confirms it).
func Add(ctx context.Context, st *fallback.Store, key string, sp leaparray.Spec, n, now int64) error {
	writer := fmt.Sprintf("fallbacktest-%d-%d", time.Now().UnixNano(), writers.Add(1))
	b := st.NewBatch(writer, []fallback.Delta{{Key: key, Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: uint64(n)}}}})
	return st.SendBatch(ctx, b)
}
