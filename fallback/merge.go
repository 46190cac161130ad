package fallback

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// Merge adds buckets to the counter bucket by bucket, creating it if needed, as
// leaparray.Store.Merge does: buckets older than the counter's window at its head are
// dropped. Merging is additive: merging the same buckets twice counts them twice (see
// MergeOnce). now is not used by the merge rule (it does not depend on the time); it is
// taken so that every write has the caller's clock at hand.
func (st *Store) Merge(ctx context.Context, key string, sp leaparray.Spec, buckets []leaparray.Bucket, now int64) error {
	_, err := st.merge(ctx, key, sp, "", buckets)
	return err
}

// MergeOnce is Merge that applies a batch once: the first call with a batchID adds the
// buckets and remembers the ID for Config.OnceTTL (a marker key next to the counter, set
// in the same script); a retry with the same ID adds nothing. It reports whether this
// call applied the batch.
func (st *Store) MergeOnce(ctx context.Context, key string, sp leaparray.Spec, batchID string, buckets []leaparray.Bucket, now int64) (bool, error) {
	if batchID == "" {
		return false, fmt.Errorf("%w: MergeOnce needs a batch ID", counter.ErrBadArgument)
	}
	return st.merge(ctx, key, sp, batchID, buckets)
}

func (st *Store) merge(ctx context.Context, key string, sp leaparray.Spec, batchID string, buckets []leaparray.Bucket) (bool, error) {
	c, skip, err := st.mergeCall(key, sp, batchID, buckets)
	if err != nil {
		return false, err
	}
	if skip {
		return true, nil // nothing to add, as for an empty snapshot in memory
	}
	n, err := decodeInt("merge", st.run(ctx, c))
	return n == 1, err
}

// mergeCall builds merge.lua's call. skip says there is nothing to do (no buckets and
// no batch to mark), as leaparray.Store.Merge does nothing for an empty snapshot.
func (st *Store) mergeCall(key string, sp leaparray.Spec, batchID string, buckets []leaparray.Bucket) (c call, skip bool, err error) {
	if err := checkSpec(sp); err != nil {
		return call{}, false, err
	}
	if len(buckets) == 0 && batchID == "" {
		return call{}, true, nil
	}
	ck := counterKey(key, sp)
	c = call{script: scripts.merge, keys: []string{ck}}
	if batchID != "" {
		c.keys = append(c.keys, onceKey(ck, batchID))
	}
	if err := checkCounts(buckets); err != nil {
		return call{}, false, err
	}
	c.args = make([]any, 0, 3+2*len(buckets))
	c.args = append(c.args, sp.Buckets, st.ttlMs(sp), st.onceTTLMs())
	for _, b := range buckets {
		c.args = append(c.args, b.Index, strconv.FormatUint(b.Count, 10))
	}
	return c, false, nil
}

// Load returns the counter's buckets within the window at time now (max(bucket(now),
// head)), oldest first and non-zero only, as leaparray.Store.Snapshot does; nil if the
// counter is unknown. A new owner of a counter loads it with this.
func (st *Store) Load(ctx context.Context, key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	if err := checkSpec(sp); err != nil {
		return nil, err
	}
	var fields map[string]string
	err := st.guard(ctx, func() error {
		var err error
		fields, err = st.rdb.HGetAll(ctx, counterKey(key, sp)).Result()
		return err
	})
	if err != nil {
		return nil, unavailable("load", err)
	}
	return windowOf(fields, sp, now)
}

// windowOf picks the buckets in the window out of a counter hash's fields.
func windowOf(fields map[string]string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	hv, ok := fields["h"]
	if !ok {
		return nil, nil
	}
	head, err := strconv.ParseInt(hv, 10, 64)
	if err != nil {
		return nil, unavailable("load", fmt.Errorf("bad head %q", hv))
	}
	e := max(sp.Bucket(now), head)
	var out []leaparray.Bucket
	for f, v := range fields {
		j, err := strconv.ParseInt(f, 10, 64)
		if err != nil || j <= e-int64(sp.Buckets) || j > e {
			continue // h, s, or out of the window
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, unavailable("load", fmt.Errorf("bad count %q in bucket %d", v, j))
		}
		if n > 0 {
			out = append(out, leaparray.Bucket{Index: j, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b leaparray.Bucket) int { return cmp.Compare(a.Index, b.Index) })
	return out, nil
}
