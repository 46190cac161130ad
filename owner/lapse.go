package owner

import (
	"context"

	"github.com/leapcount/leapcount/lease"
)

// Lapsed is told the partitions whose lease ran out while this node held them (the
// lease.Keeper's OnLapse). Another node may have been granted them since, and decided
// their counters: with Redis their memory is stale, so they are marked stale, and
// dropped (after their deltas are written) before they are decided again. Without
// Redis the memory is kept: it is what this node counted, and whoever decided them
// meanwhile hands its own counts back, to be added, when it hands them on.
func (o *Owner) Lapsed(s lease.Set) {
	if o.cfg.Redis == nil {
		return
	}
	o.parts.mu.Lock()
	o.decide.Lock()
	n := 0
	s.Each(func(p int) {
		switch o.parts.get(p) {
		case stMine:
			o.parts.set(p, stStale)
			n++
		case stLent:
			// Not decided now, but its memory is as stale: once its counters are back
			// it is reloaded (as blind memory is) before it is decided.
			o.markBlind(p, "", true)
		}
	})
	o.decide.Unlock()
	o.parts.mu.Unlock()
	if n > 0 {
		o.cfg.Logger.Warn("lease lapsed: these partitions are reloaded from Redis before they are decided again", "partitions", n)
		o.parts.signal()
		o.kickFlush()
	}
}

// cleanStale drops the memory of stale partitions once Redis answers: their counters
// leave memory, their deltas go to the write-behind, and they are decided again,
// loading each counter from Redis once its deltas are confirmed there. Counters decided
// blind while Redis was down are dropped and reloaded the same way (their partition not
// decided meanwhile): Redis has what others counted before, their memory does not.
func (o *Owner) cleanStale() {
	if o.cfg.Redis == nil || !o.cfg.Redis.Healthy() {
		return
	}
	rg := o.ring.Load()
	if rg == nil {
		return
	}
	held := o.fencedStale(context.Background())
	o.parts.mu.Lock()
	defer o.parts.mu.Unlock()
	stale := lease.NewSet(len(o.parts.state))
	partial := map[int]map[string]struct{}{} // blind partitions: only these keys are dropped
	o.decide.Lock()
	for p := range o.parts.state {
		if held[p] {
			continue // its counts here wait for another node's writes: not reloaded yet
		}
		if o.parts.blind[p].Swap(false) {
			switch bs := o.blindKeys.take(p); {
			case o.parts.get(p) != stMine: // stale or gone: all of it is dropped anyway
			case bs == nil || bs.all:
				o.parts.set(p, stStale)
			default:
				o.parts.set(p, stDropping)
				partial[p] = bs.keys
				continue
			}
		}
		if o.parts.get(p) == stStale {
			o.parts.set(p, stDropping)
			stale.Add(p)
		}
	}
	o.decide.Unlock()
	if stale.Len() == 0 && len(partial) == 0 {
		return
	}
	ev := o.cfg.Store.Evict(func(k string) bool {
		p := rg.Partition(k)
		if keys, ok := partial[p]; ok {
			_, blind := keys[k]
			return blind
		}
		return stale.Has(p)
	})
	o.flush.enqueue(pendingOf(ev))
	o.decide.Lock()
	for p := range partial {
		stale.Add(p)
	}
	stale.Each(func(p int) {
		if o.parts.get(p) == stDropping {
			o.parts.set(p, stMine)
		}
	})
	o.decide.Unlock()
	o.parts.signal()
	o.kickFlush()
	o.cfg.Logger.Info("stale partitions dropped from memory; their counters reload from Redis", "partitions", stale.Len(), "counters", len(ev))
}

// fencedStale returns the partitions that would be dropped and reloaded now but hold
// counts whose write-behind elsewhere Redis has not confirmed (fence.go): a reload would
// miss it. It reads Redis, so it runs before the locks are taken.
func (o *Owner) fencedStale(ctx context.Context) map[int]bool {
	var held map[int]bool
	for p := range o.parts.state {
		if st := o.parts.get(p); st != stStale && !(st == stMine && o.parts.blind[p].Load()) {
			continue
		}
		if !o.reached(ctx, p) {
			if held == nil {
				held = map[int]bool{}
			}
			held[p] = true
		}
	}
	return held
}
