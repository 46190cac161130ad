package owner

import (
	"context"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// Lapsed is told the partitions whose lease ran out while this node held them (the
// lease.Keeper's OnLapse). Another node may have been granted them since, and decided
// their counters: with Redis their memory is stale, so they are marked stale, and
// dropped (after their deltas are written) before they are decided again. Without
// Redis the memory is kept: it is what this node counted, and whoever decided them
// meanwhile hands its own counts back, to be added, when it hands them on.
func (o *Owner) Lapsed(s lease.Set) {
	if n := o.markStale(s); n > 0 {
		o.cfg.Logger.Warn("lease lapsed: these partitions are reloaded from Redis before they are decided again", "partitions", n)
	}
}

// markStale makes the partitions of s that this node decides stale (dropped, after
// their deltas are written, and reloaded before they are decided again), and the lent
// ones reloaded once their counters are back; it returns how many it made stale. A
// no-op without Redis.
func (o *Owner) markStale(s lease.Set) int {
	if o.cfg.Redis == nil || s.Len() == 0 {
		return 0
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
		o.parts.signal()
		o.kickFlush()
	}
	return n
}

// cleanStale drops the memory of stale partitions once Redis answers: their counters
// leave memory, their deltas go to the write-behind, and they are decided again,
// loading each counter from Redis once its deltas are confirmed there. Counters decided
// blind while Redis was down are dropped and reloaded the same way (their partition not
// decided meanwhile): Redis has what others counted before, their memory does not. So
// are counters handed here directly, once this node's writes of their partition are
// confirmed (late.go). A lent partition is left until its counters are back.
func (o *Owner) cleanStale() {
	if o.cfg.Redis == nil || !o.cfg.Redis.Healthy() {
		return
	}
	rg := o.ring.Load()
	if rg == nil {
		return
	}
	held := o.fencedStale(context.Background(), rg)
	o.parts.mu.Lock()
	defer o.parts.mu.Unlock()
	d := drops{whole: lease.NewSet(len(o.parts.state)), keys: map[int]map[string]struct{}{}}
	o.decide.Lock()
	for p := range o.parts.state {
		if held[p] || o.parts.get(p) == stLent {
			continue // its counts wait for another node's writes, or are not back yet
		}
		if o.parts.blind[p].Swap(false) {
			d.plan(o, p, o.blindKeys.take(p), true)
		}
		if o.parts.get(p) == stStale {
			d.all(o, p)
		}
	}
	for _, p := range o.refreshKeys.parts() {
		if !held[p] && o.parts.get(p) != stLent {
			d.plan(o, p, o.refreshKeys.take(p), false)
		}
	}
	o.decide.Unlock()
	if d.whole.Len() == 0 && len(d.keys) == 0 {
		return
	}
	ev := o.cfg.Store.Evict(d.has(rg))
	o.flush.enqueue(pendingOf(ev))
	o.decide.Lock()
	for p := range d.keys {
		d.whole.Add(p)
	}
	d.whole.Each(func(p int) {
		if o.parts.get(p) == stDropping {
			o.parts.set(p, stMine)
		}
	})
	o.decide.Unlock()
	o.parts.signal()
	o.kickFlush()
	o.cfg.Logger.Info("stale partitions dropped from memory; their counters reload from Redis", "partitions", d.whole.Len(), "counters", len(ev))
}

// drops is what a cleanStale drops: whole partitions, and some keys of others.
type drops struct {
	whole lease.Set
	keys  map[int]map[string]struct{}
}

// all drops the whole of p. The caller holds decide.
func (d *drops) all(o *Owner, p int) {
	o.parts.set(p, stDropping)
	d.whole.Add(p)
	delete(d.keys, p)
}

// plan drops the counters bs lists of p (all of them if bs says so, or if bs is nil and
// nilIsAll), unless p is no longer this node's. The caller holds decide.
func (d *drops) plan(o *Owner, p int, bs *blindSet, nilIsAll bool) {
	switch st := o.parts.get(p); {
	case st == stStale || d.whole.Has(p):
		d.all(o, p)
	case st != stMine && st != stDropping: // gone: its memory leaves anyway
	case bs == nil && !nilIsAll:
	case bs == nil || bs.all:
		d.all(o, p)
	default:
		o.parts.set(p, stDropping)
		if d.keys[p] == nil {
			d.keys[p] = map[string]struct{}{}
		}
		for k := range bs.keys {
			d.keys[p][k] = struct{}{}
		}
	}
}

// has says which keys of ring rg are dropped.
func (d *drops) has(rg *ring.Ring) func(string) bool {
	return func(k string) bool {
		p := rg.Partition(k)
		if d.whole.Has(p) {
			return true
		}
		_, ok := d.keys[p][k]
		return ok
	}
}

// fencedStale returns the partitions that would be dropped and reloaded now but hold
// counts whose write-behind elsewhere Redis has not confirmed (fence.go): a reload would
// miss it. Partitions with counters handed here (to refresh) are held too while this
// node's own writes of them are not all confirmed. It reads Redis, so it runs before
// the locks are taken.
func (o *Owner) fencedStale(ctx context.Context, rg *ring.Ring) map[int]bool {
	held := map[int]bool{}
	refresh := lease.NewSet(len(o.parts.state))
	for _, p := range o.refreshKeys.parts() {
		refresh.Add(p)
	}
	if refresh.Len() > 0 {
		for _, r := range o.flush.unsettledIn(rg, refresh) {
			held[rg.Partition(r.Key)] = true
		}
	}
	for p := range o.parts.state {
		st := o.parts.get(p)
		if st != stStale && !(st == stMine && (o.parts.blind[p].Load() || refresh.Has(p))) {
			continue
		}
		if !held[p] && !o.reached(ctx, p) {
			held[p] = true
		}
	}
	return held
}
