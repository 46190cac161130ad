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

// Loaded is one counter's result in LoadMany.
type Loaded struct {
	Buckets []leaparray.Bucket
	Err     error
}

// LoadMany returns each counter's buckets within the window at time now (max(bucket(now),
// head)), oldest first and non-zero only, as leaparray.Store.Snapshot does; nil for an
// unknown counter. A new owner loads counters with it, in one pipeline (one round trip
// per server) instead of one round trip each: a batch of ops on counters not in memory waits for
// Redis once (BenchmarkNewCounters/redis-load). Concurrent calls are coalesced too
// (loadQueue).
func (st *Store) LoadMany(ctx context.Context, refs []CounterRef, now int64) []Loaded {
	req := &loadReq{refs: refs, now: now, out: make([]Loaded, len(refs)), done: make(chan struct{})}
	if st.loads.add(req) {
		st.sendLoads(context.WithoutCancel(ctx))
	}
	select {
	case <-req.done:
		return req.out
	case <-ctx.Done():
		out := make([]Loaded, len(refs))
		for i := range out {
			out[i].Err = unavailable("load", ctx.Err())
		}
		return out
	}
}

// sendLoads sends the loads waiting in one pipeline, and goes on, on a goroutine of its
// own (so that its caller is not held up by later loads), while more wait.
func (st *Store) sendLoads(ctx context.Context) {
	reqs := st.loads.take()
	var refs []CounterRef
	for _, r := range reqs {
		refs = append(refs, r.refs...)
	}
	fields, errs := st.fetch(ctx, refs)
	i := 0
	for _, r := range reqs {
		for j, ref := range r.refs {
			if r.out[j].Err = errs[i]; errs[i] == nil {
				r.out[j].Buckets, r.out[j].Err = windowOf(fields[i], ref.Spec, r.now)
			}
			i++
		}
		close(r.done)
	}
	if st.loads.done() {
		go st.sendLoads(ctx)
	}
}

// fetch reads the counters' hashes: one command for one, a pipeline for more.
func (st *Store) fetch(ctx context.Context, refs []CounterRef) ([]map[string]string, []error) {
	fields, errs := make([]map[string]string, len(refs)), make([]error, len(refs))
	for i, r := range refs {
		errs[i] = checkSpec(r.Spec)
	}
	if len(refs) == 1 { // a plain command: a pipeline waits twice the read timeout on a hung Redis
		if errs[0] == nil {
			errs[0] = st.guard(ctx, func() error {
				var err error
				fields[0], err = st.rdb.HGetAll(ctx, counterKey(refs[0].Key, refs[0].Spec)).Result()
				return err
			})
			if errs[0] != nil {
				errs[0] = unavailable("load", errs[0])
			}
		}
		return fields, errs
	}
	cmds := make([]*redis.MapStringStringCmd, len(refs))
	err := st.guard(ctx, func() error {
		_, err := st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, r := range refs {
				if errs[i] == nil {
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
	for i := range refs {
		switch {
		case errs[i] != nil:
		case cmds[i] == nil: // the breaker refused the pipeline: nothing was sent
			errs[i] = unavailable("load", err)
		case cmds[i].Err() != nil && !errors.Is(cmds[i].Err(), redis.Nil):
			errs[i] = unavailable("load", cmds[i].Err())
		default:
			fields[i] = cmds[i].Val()
		}
	}
	return fields, errs
}
