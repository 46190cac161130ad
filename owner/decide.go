package owner

import (
	"context"
	"fmt"

	"github.com/leapcount/leapcount/counter"
)

// verdict is what the partition's state says about an op now.
type verdict uint8

const (
	decideIt verdict = iota // decide it here
	waitFor                 // this node's, not decidable yet (no lease yet, or stale memory being dropped)
	notMine                 // not decided here
)

// Do decides ops on counters this node owns. Ops whose partition this node owns but
// cannot decide yet (its lease is not granted yet, or its memory is being reloaded)
// wait for that, at most AcquireWait; ops it does not decide are answered
// counter.ErrNotOwner: certainly not applied, so the router sends them on.
func (o *Owner) Do(ctx context.Context, ops []counter.Op, results []counter.Result) {
	o.awaitAll(ctx, ops)
	o.decideBatch(ctx, ops, results)
}

// Immediate is a Doer like the Owner that never waits for a lease: it answers
// ErrNotOwner at once instead. Ops forwarded by peers are decided with it, in the rpc
// connection's reader, which must never block (the peer's lease heartbeats come on the
// same connection); the sender routes them again shortly.
func (o *Owner) Immediate() counter.Doer { return immediate{o} }

type immediate struct{ o *Owner }

func (im immediate) Do(ctx context.Context, ops []counter.Op, results []counter.Result) {
	im.o.decideBatch(ctx, ops, results)
}

// awaitAll waits, at most AcquireWait, until every op's partition that must be waited
// for is decidable; decideBatch then judges again.
func (o *Owner) awaitAll(ctx context.Context, ops []counter.Op) {
	rg := o.ring.Load()
	if rg == nil {
		return
	}
	now := o.cfg.Leases.Now()
	var waits []int
	for i := range ops {
		p := rg.Partition(ops[i].Key)
		if o.judge(p, now, o.redisUp()) == waitFor && !containsInt(waits, p) {
			waits = append(waits, p)
		}
	}
	if len(waits) == 0 || !o.cfg.Leases.Quorate(now) {
		return // a node cut off from the majority would wait in vain
	}
	ctx, cancel := context.WithTimeout(ctx, o.cfg.AcquireWait)
	defer cancel()
	for _, p := range waits {
		o.awaitPartition(ctx, p)
	}
}

// awaitPartition waits until p is decidable, or no longer this node's, or ctx ends.
func (o *Owner) awaitPartition(ctx context.Context, p int) {
	for ctx.Err() == nil {
		ch := o.parts.changed.Load() // before the check: a change in between is not missed
		switch o.parts.get(p) {
		case stMine:
			_ = o.cfg.Leases.Wait(ctx, p)
			if o.parts.get(p) == stMine {
				return
			}
		case stStale, stDropping, stLent:
			select {
			case <-*ch:
			case <-ctx.Done():
			}
		default:
			return
		}
	}
}

// redisUp reports whether Redis answers (always true without Redis). A batch takes it
// once and decides by that one answer throughout: were it asked again at each step, a
// counter could skip its load while Redis is down and then be decided, from empty
// memory, as if Redis were up, never to be reloaded (its Redis state lost from view).
func (o *Owner) redisUp() bool { return o.cfg.Redis == nil || o.cfg.Redis.Healthy() }

// judge says what to do with an op on partition p at now (Leases' clock), Redis up or
// not as redisUp says.
func (o *Owner) judge(p int, now int64, redisUp bool) verdict {
	switch o.parts.get(p) {
	case stMine:
		if redisUp && o.parts.blind[p].Load() {
			// Counters were started here from empty memory while Redis was down: until
			// cleanStale (within a flush interval) drops and reloads them, memory lacks
			// what Redis has, and a count or allow from it would be short.
			o.kickFlush()
			return waitFor
		}
		if o.cfg.Leases.Holds(p, now) {
			return decideIt
		}
		return waitFor
	case stStale:
		// Stale memory is dropped and reloaded from Redis; while Redis is down it is
		// the best there is, and is decided from (degraded, see the package doc).
		if !redisUp && o.cfg.Leases.Holds(p, now) {
			return decideIt
		}
		return waitFor
	case stDropping, stLent:
		return waitFor
	}
	return notMine
}

// decideBatch decides the ops that may be decided now and answers the others
// ErrNotOwner. With Redis, counters not in memory are loaded first.
func (o *Owner) decideBatch(ctx context.Context, ops []counter.Op, results []counter.Result) {
	o.decide.RLock()
	defer o.decide.RUnlock()
	rg := o.ring.Load()
	if rg == nil {
		notOwned(results, "this node has no ring yet")
		return
	}
	now := o.cfg.Leases.Now()
	redisUp := o.redisUp()
	var failed map[int]error // ops whose counter could not be loaded
	var unloaded []int       // partitions whose counters were not loaded: not decided now
	if o.cfg.Redis != nil {
		var misses []*miss
		if misses, unloaded = o.misses(rg, ops, now, redisUp); len(misses) > 0 {
			o.decide.RUnlock()
			o.load(ctx, ops, misses)
			o.decide.RLock()
			now = o.cfg.Leases.Now()
			failed = o.install(rg, ops, misses)
		}
	}
	counter.DoExcept(ctx, ops, results, func(i int) error {
		op := &ops[i]
		if o.cfg.Limits.Validate(op) != nil {
			return nil // answered by Local with its validation error
		}
		p := rg.Partition(op.Key)
		if v := o.judge(p, now, redisUp); v == waitFor && !o.cfg.Leases.Quorate(now) {
			return fmt.Errorf("%w: this node cannot reach a majority of the cluster", counter.ErrUnavailable)
		} else if v != decideIt || containsInt(unloaded, p) {
			// (unloaded: granted since the misses were listed, and its counter not loaded.)
			return fmt.Errorf("%w: partition %d of %q is not decided here now", counter.ErrNotOwner, p, op.Key)
		}
		if o.cfg.Redis != nil {
			o.noteDecided(p)
		}
		if op.Kind != counter.Incr && op.Kind != counter.Reset && o.blind(p, op, redisUp) {
			// Memory does not have what Redis has: a count read from it would be short,
			// and an allow decided from it could admit past the limit. They fail (allow
			// is answered by the fail policy) and count nothing. An incr is counted: its
			// delta reaches Redis when it returns, and only its answer is short.
			return fmt.Errorf("%w: %q is not in memory and Redis is down", counter.ErrUnavailable, op.Key)
		}
		return failed[i]
	}, func(ctx context.Context, ops []counter.Op, results []counter.Result) {
		o.decideHere(ctx, ops, results, redisUp)
	})
}

// blind reports whether op would be decided from memory that may lack what Redis holds:
// Redis is down, and the counter is not in memory, or its partition's memory is stale,
// or it was started from empty memory while Redis was down.
func (o *Owner) blind(p int, op *counter.Op, redisUp bool) bool {
	if redisUp {
		return false
	}
	if o.parts.get(p) == stStale || !o.cfg.Store.Has(op.Key, spec(op)) {
		return true
	}
	return o.parts.blind[p].Load() && o.blindKeys.has(p, op.Key)
}

// decideHere decides ops in memory; ops decided on counters that were not loaded (Redis
// down) mark them blind, to be reloaded once Redis is back (blind.go).
func (o *Owner) decideHere(ctx context.Context, ops []counter.Op, results []counter.Result, redisUp bool) {
	if !redisUp {
		rg := o.ring.Load()
		for i := range ops {
			if !o.cfg.Store.Has(ops[i].Key, spec(&ops[i])) && ops[i].Kind != counter.Count {
				o.markBlind(rg.Partition(ops[i].Key), ops[i].Key, false)
			}
		}
	}
	o.local.Do(ctx, ops, results)
}

func notOwned(results []counter.Result, why string) {
	for i := range results {
		results[i] = counter.Result{Err: fmt.Errorf("%w: %s", counter.ErrNotOwner, why)}
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
