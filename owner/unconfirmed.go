package owner

import (
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
)

// What the write-behind holds that Redis has not confirmed, for an operator's figures
// and for the simulation's checks of what a crash may lose.

// Unwritten reports how many counters have deltas Redis has not confirmed, and how many
// partitions' late-write marks are not written yet (not counting what the counters
// gained since the last flush, written at the next).
func (o *Owner) Unwritten() int {
	o.flush.mu.Lock()
	n := len(o.flush.refs)
	o.flush.mu.Unlock()
	return n + int(o.late.pending.Load())
}

// Flushes reports how many flushes have ended (tests and simulations wait for one).
func (o *Owner) Flushes() uint64 { return o.flush.rounds.Load() }

// Unconfirmed is how much of the counter this node holds that Redis has not confirmed:
// its pending part in memory, queued, in unconfirmed batches and in releases. A crash
// loses at most this much of it (the simulation bounds its checks by it).
func (o *Owner) Unconfirmed(key string, sp leaparray.Spec) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
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

// InMemory is the count of the counter at now in this node's memory, the store's and
// its releases': all a crash without Redis loses of it.
func (o *Owner) InMemory(key string, sp leaparray.Spec, now int64) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.cfg.Store.Count(key, sp, now)
	return uint64(c) + o.releases.held(fallback.CounterRef{Key: key, Spec: sp}, false)
}

func sumBuckets(bs []leaparray.Bucket) uint64 {
	var n uint64
	for _, b := range bs {
		n += b.Count
	}
	return n
}

// PendingReset reports whether this node holds a reset of the counter that Redis has
// not confirmed: lost in a crash, it brings back what it erased.
func (o *Owner) PendingReset(key string, sp leaparray.Spec) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
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

// WriteBehindStats are the write-behind's figures for an operator: the age of the
// oldest batch made and not yet confirmed (0: none waits), and the flushes that failed
// (Redis unreachable, or a batch not confirmed), whose batches go again.
func (o *Owner) WriteBehindStats() (oldest time.Duration, failed uint64) {
	o.mu.Lock()
	if len(o.flush.batches) > 0 {
		oldest = o.cfg.Clock.Since() - o.flush.batches[0].made
	}
	o.mu.Unlock()
	return oldest, o.flush.failed.Load()
}
