package owner

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

// Fences keep counts that are in memory here and may not be in Redis yet from being
// read back from Redis. A node that hands counters on directly (Redis down) while some
// of their write-behind is in doubt (sent, not answered: it may still apply when Redis
// returns and the sender sends it again) gives the receiver those calls as fences. The
// receiver holds the counts, but a counter of those partitions loaded from Redis, or
// reloaded (its memory went stale), would miss what the call still has to apply. So,
// until Redis shows every fence reached (fallback.Store.Reached), such loads wait, and
// a release of the partition through Redis waits too, or hands the fences on with the
// counters. A fence not reached within fenceMax (its writer died before sending the
// call again, or Redis lost its marks) is dropped: what it carried is lost, as a
// crashed node's unwritten counts are.

// fenceMax bounds how long a fence holds loads back.
const fenceMax = time.Minute

type fences struct {
	mu sync.Mutex
	by map[int]fenceSet // per partition
}

type fenceSet struct {
	fs    []fallback.Fence
	since time.Time
}

// add records fs on partitions ps.
func (f *fences) add(ps []int, fs []rpc.HandoffFence) {
	if len(fs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[int]fenceSet{}
	}
	for _, p := range ps {
		set := f.by[p]
		if set.since.IsZero() {
			set.since = time.Now()
		}
		for _, h := range fs {
			fe := fallback.Fence{WriterKey: h.WriterKey, Seq: h.Seq}
			if !slices.Contains(set.fs, fe) {
				set.fs = append(set.fs, fe)
			}
		}
		f.by[p] = set
	}
}

// of returns the fences of partitions ps, once each; drop forgets them.
func (f *fences) of(ps []int, drop bool) []rpc.HandoffFence {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rpc.HandoffFence
	for _, p := range ps {
		for _, fe := range f.by[p].fs {
			h := rpc.HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq}
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
		if drop {
			delete(f.by, p)
		}
	}
	return out
}

// reached reports whether partition p has no fence left that Redis has not reached;
// reached fences, and those older than fenceMax, are forgotten. It reads Redis only
// for a partition with fences.
func (o *Owner) reached(ctx context.Context, p int) bool {
	f := &o.fenced
	f.mu.Lock()
	set, ok := f.by[p]
	f.mu.Unlock()
	if !ok {
		return true
	}
	done := time.Since(set.since) > fenceMax
	if done {
		o.cfg.Logger.Warn("write-behind of counters handed over not confirmed in Redis in time: what it carried is lost",
			"partition", p, "fences", len(set.fs))
	} else if ok, err := o.cfg.Redis.Reached(ctx, set.fs); err != nil || !ok {
		return false
	}
	f.mu.Lock()
	if cur, ok := f.by[p]; ok && len(cur.fs) == len(set.fs) { // none added meanwhile
		delete(f.by, p)
	}
	f.mu.Unlock()
	return true
}

// allReached is reached for every partition of ps.
func (o *Owner) allReached(ctx context.Context, ps []int) bool {
	for _, p := range ps {
		if !o.reached(ctx, p) {
			return false
		}
	}
	return true
}

// ownFences are the fences of this node's write-behind calls in doubt that carry
// deltas of counters of the partitions in set.
func (o *Owner) ownFences(rg *ring.Ring, set lease.Set) []rpc.HandoffFence {
	f := &o.flush
	f.running.Lock() // a send in flight changes its calls' states
	defer f.running.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rpc.HandoffFence
	for _, sb := range f.batches {
		for _, fe := range sb.b.Fences(func(d fallback.Delta) bool { return set.Has(rg.Partition(d.Key)) }) {
			out = append(out, rpc.HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq})
		}
	}
	return out
}
