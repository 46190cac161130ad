package owner

import (
	"context"
	"fmt"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/ring"
)

// action is what to do with an op, as its partition's state says now.
type action uint8

const (
	decideIt action = iota // decide it here
	waitFor                // this node's, not decidable yet (no lease yet, stale memory, counters lent)
	notMine                // not decided here
)

// judge says what to do with an op on partition p at now (Config.Clock), Redis up or
// not as redisUp says (verdict), and asks for the clean-up a blind partition waits for.
func (o *Owner) judge(p int, now time.Duration, redisUp bool) action {
	a, blind := o.verdict(p, now, redisUp)
	if blind {
		o.kick()
	}
	return a
}

// verdict is judge without side effects (Record.verdict): the simulation checks it never
// lets two nodes decide one partition.
// It asks for the lease and the ring only in the states whose verdict they decide:
// it is on every op's path.
func (o *Owner) verdict(p int, now time.Duration, redisUp bool) (a action, blind bool) {
	r := o.parts.at(p)
	var holds, owns bool
	switch r.State {
	case Owned, Stale:
		holds = o.cfg.Leases.Holds(p, now) || mutate.On(mutate.DecideWithoutLease)
	case Releasing, ReleasingStale:
		owns = o.owns(p)
	}
	return r.verdict(holds, redisUp, owns)
}

// request is one batch of ops being decided by Start.
type request struct {
	ctx     context.Context
	ops     []counter.Op
	results []counter.Result
	done    func()
	until   time.Duration // Clock.Since after which it no longer waits for its partitions
	noWait  bool          // its wait ran out, or too many wait: decide or refuse now
	full    bool          // it may not wait: too many wait (waiters' bounds)

	// Under waiters.mu.
	state reqState
	part  int    // the partition it waits for
	gen   uint32 // its waits so far: an entry of an earlier one is stale (parkedOn)
	endAt int    // its index in waiters.ends; -1 when not there
}

type reqState uint8

const (
	reqRunning reqState = iota
	reqWaiting
	reqDone
)

// Decide decides ops on counters this node owns (see counter.Decider): at once when
// every one can be (decideAtOnce), else by start.
func (o *Owner) Decide(ctx context.Context, b *counter.Batch) bool {
	for i := range b.Ops {
		_ = o.cfg.Limits.Ready(&b.Ops[i]) // an invalid op stays unchecked: Local answers it
	}
	if o.decideAtOnce(b.Ops, b.Results) {
		return true
	}
	o.start(ctx, b)
	return false
}

// start decides b's ops and then calls b.Done, possibly before it returns. Ops whose
// partition this node owns but cannot decide yet (its lease is not granted yet, its
// memory is being reloaded, its counters are lent, a release the ring undid is still
// sending) wait for that, at most
// HandoffWait; ops it does not decide are answered counter.ErrNotOwner: certainly not
// applied, so the router sends them on. With Redis, counters not in memory are loaded
// first. Nothing waits on a goroutine: waiting ops are retried when their partitions
// change, loads go through Config.Redis.
func (o *Owner) start(ctx context.Context, b *counter.Batch) {
	r := &request{ctx: ctx, ops: b.Ops, results: b.Results, done: b.Done, endAt: -1}
	r.until = o.cfg.Clock.Since() + o.cfg.HandoffWait
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		r.until = min(r.until, o.cfg.Clock.Since()+left-answerMargin(left))
	}
	seq := o.waiting.seen()
	if !o.decide.TryRLock() {
		// A ring change holds the lock: the caller may be an event loop, which must
		// not wait for it.
		o.deferAttempt(r)
		return
	}
	o.attemptLocked(r, seq)
}

// answerMargin is how long before its caller's deadline an op that waits here is
// answered not decided: an answer that arrives in time is retried (at the new owner,
// say); one that arrives after the caller gave up is an outcome unknown to it.
func answerMargin(left time.Duration) time.Duration {
	return min(max(left/10, 20*time.Millisecond), 200*time.Millisecond)
}

// attempt decides r now if it can, or parks it until its partitions change, or starts
// the loads its counters need.
func (o *Owner) attempt(r *request) {
	seq := o.waiting.seen()
	o.decide.RLock()
	o.attemptLocked(r, seq)
}

// attemptLocked is attempt with decide held shared, which it lets go of; seq is the
// wakes seen before the lock was taken.
func (o *Owner) attemptLocked(r *request, seq uint64) {
	rg := o.ring.Load()
	if rg == nil {
		o.decide.RUnlock()
		notOwned(r.results, "this node has no ring yet")
		o.answer(r)
		return
	}
	now := o.cfg.Clock.Since()
	up := o.redisUp()
	for p := o.waitsFor(rg, r.ops, now, up); p >= 0 && o.mayWait(r, now); p = o.waitsFor(rg, r.ops, now, up) {
		switch o.waiting.park(o, r, p, rg.PartitionCount(), seq) {
		case parked:
			o.decide.RUnlock()
			return
		case waitersFull:
			r.noWait, r.full = true, true
			continue // mayWait ends the loop
		}
		// A wake came since seq, and found r not parked yet: judge again.
		seq = o.waiting.seen()
		now, up = o.cfg.Clock.Since(), o.redisUp()
	}
	var unloaded []int
	if o.cfg.Redis != nil && up {
		var l *load
		if l, unloaded = o.listMisses(rg, r, now); l != nil {
			o.decide.RUnlock()
			o.startLoad(l)
			return
		}
	}
	o.decideNow(rg, r, now, up, nil, unloaded)
	o.decide.RUnlock()
	o.answer(r)
}

// waitsFor returns the first partition of a valid op that must be waited for, or -1.
func (o *Owner) waitsFor(rg *ring.Ring, ops []counter.Op, now time.Duration, up bool) int {
	for i := range ops {
		if !ops[i].Checked() {
			continue
		}
		if p := rg.SlotPartition(ops[i].Slot); o.judge(p, now, up) == waitFor {
			return p
		}
	}
	return -1
}

// mayWait reports whether r may still wait for its partitions: its wait has not run
// out, and this node reaches a majority (a node cut off from it would wait in vain).
func (o *Owner) mayWait(r *request, now time.Duration) bool {
	return !r.noWait && r.ctx.Err() == nil && o.cfg.Clock.Since() < r.until && o.cfg.Leases.Quorate(now)
}

// decideNow decides r's ops that may be decided now and answers the others: ErrNotOwner
// (certainly not applied), or unavailable when this node cannot reach a majority.
// failed holds, by op index, ops whose counter could not be loaded; unloaded the
// partitions whose counters were not loaded though needed. The caller holds decide
// shared.
func (o *Owner) decideNow(rg *ring.Ring, r *request, now time.Duration, up bool, failed map[int]error, unloaded []int) {
	counter.DoExcept(r.ctx, r.ops, r.results, func(i int) error {
		op := &r.ops[i]
		if !op.Checked() {
			return nil // answered by Local with its validation error
		}
		p := rg.SlotPartition(op.Slot)
		if v := o.judge(p, now, up); v == waitFor && !o.cfg.Leases.Quorate(now) {
			return fmt.Errorf("%w: this node cannot reach a majority of the cluster", counter.ErrUnavailable)
		} else if v == waitFor && r.full {
			return fmt.Errorf("%w: ownership of %q is moving, and too many ops wait for partition %d here; retry", counter.ErrUnavailable, op.Key, p)
		} else if v != decideIt || containsInt(unloaded, p) {
			// (unloaded: granted since the misses were listed, and its counter not loaded.)
			return fmt.Errorf("%w: partition %d of %q is not decided here now", counter.ErrNotOwner, p, op.Key)
		}
		if o.cfg.Redis != nil {
			o.noteDecided(p)
		}
		if op.Kind != counter.Incr && op.Kind != counter.Reset && o.blindOp(p, op, up) {
			// Memory does not have what Redis has: a count read from it would be short,
			// and an allow decided from it could admit past the limit. They fail (allow
			// is answered by the fail policy) and count nothing. An incr is counted: its
			// delta reaches Redis when it returns, and only its answer is short.
			return fmt.Errorf("%w: %q is not in memory and Redis is down", counter.ErrUnavailable, op.Key)
		}
		return failed[i]
	}, func(_ context.Context, ops []counter.Op, results []counter.Result) {
		o.decideHere(rg, ops, results, up)
	})
}

// decideHere decides ops in memory; ops decided on counters that were not loaded (Redis
// down) mark them blind, to be reloaded once Redis is back (blind.go).
func (o *Owner) decideHere(rg *ring.Ring, ops []counter.Op, results []counter.Result, redisUp bool) {
	if !redisUp {
		for i := range ops {
			if ops[i].Kind != counter.Count && !o.cfg.Store.Has(ops[i].Key, spec(&ops[i])) {
				o.markBlind(rg.Partition(ops[i].Key), ops[i].Key) // (unchecked ops among them too)
			}
		}
	}
	o.local.DecideNow(ops, results)
	o.settleSlices(rg, ops, results)
}

// answer hands r's results to its caller, once.
func (o *Owner) answer(r *request) {
	if !o.waiting.end(r) {
		return
	}
	r.done()
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

// kickDelay is how soon a kick's Tick runs.
const kickDelay = time.Millisecond

// LeasesChanged tells the owner that its leases may have changed (the lease keeper's
// hook): ops waiting for a grant are tried again.
func (o *Owner) LeasesChanged() { o.wake() }

// kick asks for a Tick soon, once however often it is asked before it runs: ops wait
// for a flush, or for blind memory to be dropped. (Soon, not at once: what a Tick does
// must not bring itself about again without a pause.)
func (o *Owner) kick() {
	if o.flush.kicked.CompareAndSwap(false, true) {
		o.cfg.Clock.AfterFunc(kickDelay, func() {
			o.flush.kicked.Store(false)
			o.post(o.tick)
		})
	}
}
