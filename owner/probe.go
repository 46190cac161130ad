package owner

import (
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/ownerprobe"
	"github.com/leapcount/leapcount/leaparray"
)

func init() { ownerprobe.Of = func(o any) ownerprobe.Probe { return probe{o.(*Owner)} } }

// probe is an owner as the simulation's checks read it (package ownerprobe documents
// each read).
type probe struct{ o *Owner }

func (pr probe) Decides(p int) bool {
	o := pr.o
	v, _ := o.verdict(p, o.cfg.Clock.Since(), o.redisUp())
	return v == decideIt
}

func (pr probe) Gen(p int) uint64 { return pr.o.parts.at(p).Gen }

func (pr probe) HoldsWhole(key string, sp leaparray.Spec) bool {
	o := pr.o
	rg := o.ring.Load()
	if rg == nil || !o.cfg.Store.Has(key, sp) {
		return false
	}
	p := rg.Partition(key)
	return o.parts.get(p) == Owned && !(o.startedBlind(p, key))
}

func (pr probe) Unconfirmed(key string, sp leaparray.Spec) uint64 {
	o := pr.o
	o.lock()
	defer o.unlock()
	ref := fallback.CounterRef{Key: key, Spec: sp}
	bs, _ := o.cfg.Store.Pending(key, sp)
	n := sumBuckets(bs)
	o.flush.mu.Lock()
	for _, d := range o.flush.queue {
		if refOf(d) == ref {
			n += sumBuckets(d.Buckets)
		}
	}
	o.flush.mu.Unlock()
	for _, sb := range o.flush.batches {
		for _, d := range sb.b.Unconfirmed() {
			if refOf(d) == ref {
				n += sumBuckets(d.Buckets)
			}
		}
	}
	return n + o.releases.held(ref, true)
}

func (pr probe) InMemory(key string, sp leaparray.Spec, now int64) uint64 {
	o := pr.o
	o.lock()
	defer o.unlock()
	c := o.cfg.Store.Count(key, sp, now)
	return uint64(c) + o.releases.held(fallback.CounterRef{Key: key, Spec: sp}, false)
}

func (pr probe) PendingReset(key string, sp leaparray.Spec) bool {
	o := pr.o
	o.lock()
	defer o.unlock()
	if _, reset := o.cfg.Store.Pending(key, sp); reset {
		return true
	}
	ref := fallback.CounterRef{Key: key, Spec: sp}
	o.flush.mu.Lock()
	i, queued := o.flush.queued[ref]
	reset := queued && o.flush.queue[i].Reset
	o.flush.mu.Unlock()
	for _, sb := range o.flush.batches {
		for _, d := range sb.b.Unconfirmed() {
			reset = reset || refOf(d) == ref && d.Reset
		}
	}
	return reset
}

func (pr probe) Releasing() int {
	o := pr.o
	o.lock()
	defer o.unlock()
	return len(o.releases.jobs)
}
