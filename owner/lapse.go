package owner

import (
	"sync/atomic"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// Lapsed is told the partitions whose lease ran out while this node held them (the
// lease.Keeper's OnLapse). Another node may have been granted them since, and decided
// their counters: with Redis their memory is stale, so they become Stale, and are
// dropped (after their deltas are written) before they are decided again. Without
// Redis the memory is kept: it is what this node counted, and whoever decided them
// meanwhile hands its own counts back, to be added, when it hands them on.
//
// It returns once its step was taken (drive.go: do), as the keeper needs: the next
// round may grant the lease again, and an op must not find the partition held and its
// memory not yet stale.
func (o *Owner) Lapsed(s lease.Set) {
	o.do(func() {
		if n := o.markStale(s, Lapsed); n > 0 {
			o.cfg.Logger.Warn("lease lapsed: these partitions are reloaded from Redis before they are decided again", "partitions", n)
			o.wakeAfter()
		}
	})
}

// markStale applies e (Lapsed or LateWrite) to the partitions of s, and returns how
// many it made Stale. A no-op without Redis. The caller holds mu.
func (o *Owner) markStale(s lease.Set, k Kind) int {
	if o.cfg.Redis == nil || s.Len() == 0 || o.parts.count() == 0 {
		return 0
	}
	n := 0
	lapsed := lease.NewSet(o.parts.count())
	var releasing []int
	o.decide.Lock()
	s.Each(func(p int) {
		if p >= o.parts.count() {
			return
		}
		if k == Lapsed && o.parts.get(p).Claimed() {
			lapsed.Add(p)
		}
		if o.step(p, on(k))&Reload != 0 {
			n++
		}
		if o.parts.get(p) == ReleasingStale {
			releasing = append(releasing, p)
		}
	})
	o.unlockDecide()
	o.dropLateResets(lapsed)
	o.releaseStale(releasing)
	if n > 0 {
		o.kick()
	}
	return n
}

// cleanStart drops the memory of stale partitions once Redis answers: their counters
// leave memory, their deltas go to the write-behind, and they are decided again,
// loading each counter from Redis once its deltas are confirmed there. Counters decided
// blind while Redis was down are dropped and reloaded the same way (their partition not
// decided meanwhile): Redis has what others counted before, their memory does not. A
// partition whose counts wait for another node's write in doubt (fence.go) waits until
// Redis shows it applied. The caller holds mu.
func (o *Owner) cleanStart() {
	rg := o.ring.Load()
	if o.cfg.Redis == nil || rg == nil || o.cleaning || !o.cfg.Redis.Healthy() {
		return
	}
	var ps []int
	for p := range o.parts.rec() {
		if r := o.parts.at(p); r.State == Stale || r.State == Owned && r.Blind {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return
	}
	o.cleaning = true
	// Stale memory is dropped and reloaded only from a Redis that still holds what it
	// held: one that lost its data is written back first (writeback.go).
	o.checkEpoch(func(kept bool) {
		if !kept {
			o.cleaning = false
			return
		}
		o.cleanFenced(rg, ps)
	})
}

// cleanFenced drops the partitions of ps that no fence holds back. The caller holds mu.
func (o *Owner) cleanFenced(rg *ring.Ring, ps []int) {
	held := make([]bool, len(ps))
	var fenced []int
	for i, p := range ps {
		if o.fenced(p) {
			fenced = append(fenced, i)
		}
	}
	if len(fenced) == 0 {
		o.cleanDrop(rg, ps, held)
		return
	}
	var left atomic.Int32
	left.Store(int32(len(fenced)))
	for _, i := range fenced {
		o.ask(func() {
			o.reached(ps[i], func(ok bool) {
				held[i] = !ok
				if left.Add(-1) == 0 { // the answers come on other goroutines: go on in a step
					o.cfg.Clock.AfterFunc(0, func() {
						o.post(func() {
							o.cleanDrop(rg, ps, held)
							o.wakeAfter()
						})
					})
				}
			})
		})
	}
}

// cleanDrop drops the partitions of ps that no fence holds back (cleanStart). The
// caller holds mu.
func (o *Owner) cleanDrop(rg *ring.Ring, ps []int, held []bool) {
	o.cleaning = false
	whole := lease.NewSet(o.parts.count())
	keys := map[int]map[string]struct{}{}
	o.decide.Lock()
	for i, p := range ps {
		if held[i] {
			continue
		}
		switch r := o.parts.at(p); {
		case r.State == Stale && r.Due && !r.Lapsed:
			// Redis lost its data since these counters came: memory is all that holds
			// them, and it is written back in full (writeBackDue), not reloaded.
			o.step(p, on(Reloaded))
		case r.State == Stale:
			// Its lease lapsed since its memory was last dropped: another node may have
			// decided it since, and written to the emptied Redis, which a write-back in
			// full would erase (TestStaleMemoryIsNotWrittenBackOverWritesToTheEmptiedRedis). So it is reloaded even when
			// due a write-back, and what only its memory held of before the loss is
			// lost (docs/guarantees.md: Faults, "Redis emptied": an owner whose lease lapses before
			// its write-back).
			whole.Add(p)
			o.blind.take(p)
			o.step(p, on(Dropped))
		case r.State == Owned && r.Blind:
			// Its blind counters leave memory while it is Stale: not decided meanwhile.
			bs := o.blind.take(p)
			o.step(p, on(RedisBack))
			if bs == nil || bs.all {
				whole.Add(p)
			} else {
				keys[p] = bs.keys
			}
		}
	}
	o.unlockDecide()
	if whole.Len() == 0 && len(keys) == 0 {
		return
	}
	ev := o.cfg.Store.Evict(func(k string) bool {
		p := rg.Partition(k)
		if whole.Has(p) {
			return true
		}
		_, ok := keys[p][k]
		return ok
	})
	o.flush.enqueue(pendingOf(ev))
	o.decide.Lock()
	for p := range keys {
		whole.Add(p)
	}
	whole.Each(func(p int) { o.step(p, on(Reloaded)) })
	o.unlockDecide()
	o.kick()
	o.cfg.Logger.Info("stale partitions dropped from memory; their counters reload from Redis", "partitions", whole.Len(), "counters", len(ev))
}
