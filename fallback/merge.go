package fallback

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/leaparray"
)

// Merge adds buckets to the counter bucket by bucket, creating it if needed, as
// leaparray.Store.Merge does: buckets older than the counter's window at its head are
// dropped. Merging is additive: merging the same buckets twice counts them twice (a
// Batch applies at most once). now is not used by the merge rule (it does not depend on
// the time); it is taken so that every write has the caller's clock at hand.
func (st *Store) Merge(ctx context.Context, key string, sp leaparray.Spec, buckets []leaparray.Bucket, now int64) error {
	d := Delta{Key: key, Spec: sp, Buckets: buckets}
	if err := checkDelta(d); err != nil {
		return err
	}
	if len(buckets) == 0 {
		return nil // nothing to add, as for an empty snapshot in memory
	}
	_, replies, err := mergeReply(st.run(ctx, st.mergeCall(d)), 1)
	if err == nil {
		err = replies[0]
	}
	if err != nil {
		return unavailable("merge", err)
	}
	return nil
}

// mergeCall is merge_many's call for one delta, without a writer key: applied each time
// it runs.
func (st *Store) mergeCall(d Delta) call {
	return call{script: scripts.mergeMany, keys: []string{counterKey(d.Key, d.Spec)}, args: st.appendDelta([]any{0, 0, 0}, d)}
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

// Loaded is one counter's Load result in LoadMany.
type Loaded struct {
	Buckets []leaparray.Bucket
	Err     error
}

// LoadMany is Load for many counters in one pipeline (one round trip per server)
// instead of one round trip each: a batch of ops on counters not in memory waits for
// Redis once (BenchmarkNewCounters/redis-load).
func (st *Store) LoadMany(ctx context.Context, refs []CounterRef, now int64) []Loaded {
	out := make([]Loaded, len(refs))
	if len(refs) == 1 { // a plain command: a pipeline waits twice the read timeout on a hung Redis
		out[0].Buckets, out[0].Err = st.Load(ctx, refs[0].Key, refs[0].Spec, now)
		return out
	}
	cmds := make([]*redis.MapStringStringCmd, len(refs))
	err := st.guard(ctx, func() error {
		_, err := st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, r := range refs {
				if checkSpec(r.Spec) == nil {
					cmds[i] = p.HGetAll(ctx, counterKey(r.Key, r.Spec))
				}
			}
			return nil
		})
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return err
	})
	for i, r := range refs {
		switch {
		case checkSpec(r.Spec) != nil:
			out[i].Err = checkSpec(r.Spec)
		case cmds[i] == nil: // the breaker refused the pipeline: nothing was sent
			out[i].Err = unavailable("load", err)
		case cmds[i].Err() != nil && !errors.Is(cmds[i].Err(), redis.Nil):
			out[i].Err = unavailable("load", cmds[i].Err())
		default:
			out[i].Buckets, out[i].Err = windowOf(cmds[i].Val(), r.Spec, now)
		}
	}
	return out
}
