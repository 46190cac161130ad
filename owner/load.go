package owner

import (
	"context"
	"fmt"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// miss is a counter to load from Redis before its op is decided.
type miss struct {
	op      int    // index of the first op on it
	gen     uint64 // its partition's generation when the miss was seen
	buckets []leaparray.Bucket
	err     error
}

// misses lists the decidable ops whose counter is not in memory (one per counter),
// while Redis is up; while it is down they are decided from memory (blind). It also
// returns the partitions of the ops whose counter is not in memory and that it did not
// find decidable: those are not decided in this batch even if their lease is granted
// before the batch is (their counters were not loaded).
func (o *Owner) misses(rg *ring.Ring, ops []counter.Op, now int64, redisUp bool) (out []*miss, unloaded []int) {
	if !redisUp {
		return nil, nil
	}
	seen := map[fallback.CounterRef]bool{}
	for i := range ops {
		op := &ops[i]
		if o.cfg.Limits.Validate(op) != nil || o.cfg.Store.Has(op.Key, spec(op)) || o.cfg.Store.ResetPending(op.Key, spec(op)) {
			continue // in memory, or reset here: what Redis holds of it is erased
		}
		p := rg.Partition(op.Key)
		ref := fallback.CounterRef{Key: op.Key, Spec: spec(op)}
		if seen[ref] {
			continue
		}
		if o.judge(p, now, redisUp) != decideIt {
			if !containsInt(unloaded, p) {
				unloaded = append(unloaded, p)
			}
			continue
		}
		seen[ref] = true
		o.noteDecided(p)
		if o.skipsLoad(p, op) {
			o.skipped.Add(1)
			continue
		}
		out = append(out, &miss{op: i, gen: o.parts.gen[p].Load()})
	}
	return out, unloaded
}

// settleWait bounds how long a load waits for this node's own deltas of the counter to
// reach Redis.
const settleWait = time.Second

// load reads the missed counters from Redis, without any lock held: a counter whose
// deltas this node has not finished writing is not read (its Redis state is behind),
// nor one of a partition fenced by another node's write still in doubt (fence.go). The
// others are read in one pipeline, and those that failed in a way that may pass (a
// timeout under load) twice more.
func (o *Owner) load(ctx context.Context, ops []counter.Op, misses []*miss) {
	now := o.cfg.Now()
	var todo []*miss
	for _, m := range misses {
		op := &ops[m.op]
		if ref := (fallback.CounterRef{Key: op.Key, Spec: spec(op)}); o.flush.unsettledRef(ref.Key, ref.Spec) {
			// Its deltas are on their way to Redis (it just left memory): wait for them.
			wctx, cancel := context.WithTimeout(ctx, settleWait)
			settled := o.waitSettled(wctx, []fallback.CounterRef{ref})
			cancel()
			if !settled {
				m.err = fmt.Errorf("%w: counter %q is still being written to Redis", counter.ErrUnavailable, op.Key)
				continue
			}
		}
		if !o.reached(ctx, o.ring.Load().Partition(op.Key)) {
			m.err = fmt.Errorf("%w: counter %q: the node it came from has not confirmed its writes in Redis yet", counter.ErrUnavailable, op.Key)
			continue
		}
		todo = append(todo, m)
	}
	todo = o.readQuiet(ctx, ops, todo)
	o.loaded.Add(int64(len(todo)))
	for attempt := 0; attempt < 3 && len(todo) > 0; attempt++ {
		refs := make([]fallback.CounterRef, len(todo))
		for i, m := range todo {
			refs[i] = fallback.CounterRef{Key: ops[m.op].Key, Spec: spec(&ops[m.op])}
		}
		var again []*miss
		for i, r := range o.cfg.Redis.LoadMany(ctx, refs, now) {
			m := todo[i]
			m.buckets, m.err = r.Buckets, r.Err
			if m.err != nil {
				m.err = fmt.Errorf("%w: counter %q could not be loaded from Redis: %v", counter.ErrUnavailable, refs[i].Key, m.err)
				again = append(again, m)
			}
		}
		if ctx.Err() != nil || !o.cfg.Redis.Healthy() {
			break
		}
		todo = again
	}
}

// install puts the loaded counters in memory, with decide held shared, unless their
// partition changed state meanwhile (its memory was dropped or handed on: the load may
// predate writes it must see). It returns, by op index, the ops whose counter is not
// usable; every op on such a counter gets the error.
func (o *Owner) install(rg *ring.Ring, ops []counter.Op, misses []*miss) map[int]error {
	bad := map[fallback.CounterRef]error{}
	for _, m := range misses {
		op := &ops[m.op]
		ref := fallback.CounterRef{Key: op.Key, Spec: spec(op)}
		p := rg.Partition(op.Key)
		switch {
		case m.err != nil:
			bad[ref] = m.err
		case o.parts.gen[p].Load() != m.gen:
			bad[ref] = fmt.Errorf("%w: partition %d changed hands while %q was loaded", counter.ErrNotOwner, p, op.Key)
		default:
			// A no-op if another op loaded it first. A load is a new counter in memory
			// like any other: within the store's bounds (its state stays in Redis).
			if _, err := o.cfg.Store.TrySeed(op.Key, spec(op), m.buckets, o.cfg.Now()); err != nil {
				bad[ref] = counter.StoreError(err)
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	failed := map[int]error{}
	for i := range ops {
		if err, ok := bad[fallback.CounterRef{Key: ops[i].Key, Spec: spec(&ops[i])}]; ok && !o.cfg.Store.Has(ops[i].Key, spec(&ops[i])) {
			failed[i] = err
		}
	}
	return failed
}

// Loads reports how many counters were loaded from Redis, and how many were created
// without a load because Redis could hold nothing of them (knowsAllOf).
func (o *Owner) Loads() (loaded, skipped int64) { return o.loaded.Load(), o.skipped.Load() }
