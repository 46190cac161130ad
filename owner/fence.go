package owner

import (
	"log/slog"
	"slices"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/lockrank"
	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
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
// call again) is dropped: what it carried is lost, as a crashed node's unwritten counts
// are. So is a fence whose writer's run is over (it left, or it restarted): no one will
// send its call again, and loads would wait fenceMax for nothing. All are dropped when
// Redis loses its data (reseed), marks included.
//
// A counter handed over under a fence that the receiver did not take into memory (it
// loads from Redis, which may hold newer counts than the sender's: receive.go) is held
// beside its fences as it came, until they are reached. Should Redis lose its data
// first, the sender does not send its call again (dropHandedOn: it leaves the counts
// to the receiver's memory, unless the counter went without its buckets), and a load
// from the emptied Redis would have none of them, so the receiver takes the counter
// into memory as it came and writes it back in full (takeHeld; sim seed 4462).

// fenceMax bounds how long a fence holds loads back.
const fenceMax = time.Minute

type fences struct {
	mu lockrank.Mutex[lockrank.OwnerFences]
	by map[int]fenceSet // per partition
}

type fenceSet struct {
	fs    []fallback.Fence
	since time.Duration // Clock.Since when the first came
	held  []HandoffCounter
}

// add records fs on partitions ps at now.
func (f *fences) add(ps []int, fs []HandoffFence, now time.Duration) {
	if len(fs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[int]fenceSet{}
	}
	for _, p := range ps {
		set, ok := f.by[p]
		if !ok {
			set.since = now
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

// hold keeps c, handed over under the fences of its partition p and not taken into
// memory, until they are reached or Redis loses its data (takeHeld). A no-op for a
// partition without fences.
func (f *fences) hold(p int, c HandoffCounter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set, ok := f.by[p]
	if !ok {
		return
	}
	c.Pending, c.Reset = nil, false // (its buckets hold both)
	set.held = slices.DeleteFunc(set.held, func(h HandoffCounter) bool { return h.Key == c.Key && h.Spec == c.Spec })
	set.held = append(set.held, c)
	f.by[p] = set
}

// heldOf returns the counters held for partitions ps.
func (f *fences) heldOf(ps []int) []HandoffCounter {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []HandoffCounter
	for _, p := range ps {
		out = append(out, f.by[p].held...)
	}
	return out
}

func (f *fences) has(p int) bool {
	if mutate.On(mutate.IgnoreFence) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.by[p]
	return ok
}

// of returns the fences of partitions ps, once each; drop forgets them.
func (f *fences) of(ps []int, drop bool) []HandoffFence {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []HandoffFence
	for _, p := range ps {
		for _, fe := range f.by[p].fs {
			h := HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq}
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

// clear drops every fence and returns how many partitions had some, and the counters
// held for them by partition: Redis lost its data, the marks that would show them
// reached with it, and a counter loaded now may lose what Redis lost anyway (README:
// Redis emptied).
func (f *fences) clear() (int, map[int][]HandoffCounter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.by)
	var held map[int][]HandoffCounter
	for p, set := range f.by {
		if len(set.held) > 0 {
			if held == nil {
				held = map[int][]HandoffCounter{}
			}
			held[p] = set.held
		}
	}
	clear(f.by)
	return n, held
}

// expire drops the fences older than fenceMax, whatever reads them (a partition never
// loaded again would keep them for good), and those whose writer gone reports over.
func (f *fences) expire(now time.Duration, gone func(writerKey string) bool, log *slog.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range sortedKeys(f.by) {
		set := f.by[p]
		if now-set.since > fenceMax {
			log.Warn("write-behind of counters handed over not confirmed in Redis in time: what it carried is lost",
				"partition", p, "fences", len(set.fs))
			delete(f.by, p)
			continue
		}
		n := len(set.fs)
		set.fs = slices.DeleteFunc(set.fs, func(fe fallback.Fence) bool { return gone(fe.WriterKey) })
		switch {
		case len(set.fs) == 0:
			delete(f.by, p)
		case len(set.fs) < n:
			f.by[p] = set
		}
		if len(set.fs) < n {
			log.Warn("write-behind in doubt of a node whose run is over: what it did not apply is lost",
				"partition", p, "fences", n-len(set.fs))
		}
	}
}

// writerGone reports whether the run that writes as writerKey is over: it left
// gracefully, or its node has started again since (a crash, a restart). That run will
// never send its calls in doubt again.
func (o *Owner) writerGone(writerKey string) bool {
	name, run, ok := parseWriter(writerKey)
	switch {
	case !ok:
		return false
	case name == o.cfg.Self:
		return run < o.cfg.Run
	}
	return o.cfg.Leases.LeftRun(name) == run || o.cfg.Leases.Incarnation(name) > run
}

// reached asks Redis whether partition p has no fence left unreached and calls done
// with the answer (true at once for a partition without fences); reached fences are
// forgotten. done may run before reached returns.
func (o *Owner) reached(p int, done func(bool)) {
	f := &o.fenced
	f.mu.Lock()
	set, ok := f.by[p]
	f.mu.Unlock()
	if !ok {
		done(true)
		return
	}
	o.cfg.Redis.Reached(set.fs, func(ok bool, err error) {
		if err != nil || !ok {
			done(false)
			return
		}
		f.mu.Lock()
		if cur, ok := f.by[p]; ok && len(cur.fs) == len(set.fs) { // none added meanwhile
			delete(f.by, p)
		}
		f.mu.Unlock()
		done(true)
	})
}

// ownFences are the fences of this node's write-behind calls in doubt that carry
// deltas of counters of the partitions in set, which are handed on (partial: those
// whose memory goes without its buckets): the batches note it (dropHandedOn). The
// caller holds mu, with no flush in flight (a send changes its calls' states).
func (o *Owner) ownFences(rg *ring.Ring, set lease.Set, partial partialMemory) []HandoffFence {
	var out []HandoffFence
	for _, sb := range o.flush.batches {
		fs := sb.b.Fences(func(d fallback.Delta) bool { return set.Has(rg.Partition(d.Key)) })
		for _, fe := range fs {
			out = append(out, HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq})
		}
		if len(fs) > 0 {
			if sb.handed == nil {
				sb.handed = lease.NewSet(len(o.parts.state))
			}
			set.Each(func(p int) {
				sb.handed.Add(p)
				sb.markPartial(rg, p, partial.stale[p], func(key string) bool { return partial.has(p, key) })
			})
		}
	}
	return out
}

// handedWithoutBuckets notes that the counter c of partition p, on its way to a new
// owner, now goes without its buckets (releaseStale). The caller holds mu.
func (o *Owner) handedWithoutBuckets(p int, c *HandoffCounter) {
	ref := fallback.CounterRef{Key: c.Key, Spec: c.Spec}
	for _, sb := range o.flush.batches {
		if sb.handed != nil && sb.handed.Has(p) && slices.Contains(sb.refs, ref) {
			if sb.partial == nil {
				sb.partial = map[fallback.CounterRef]bool{}
			}
			sb.partial[ref] = true
		}
	}
}

// orphanHandedOn marks, as Redis lost its data, the deltas of sb handed on so far for
// dropHandedOn. The caller holds mu.
func orphanHandedOn(sb *sentBatch) {
	if sb.handed == nil {
		return
	}
	if sb.orphaned == nil {
		sb.orphaned = sb.handed
	} else {
		sb.handed.Each(sb.orphaned.Add)
	}
	sb.handed = nil
}

// dropHandedOn takes out of sb, once Redis lost its data since they were handed on,
// the deltas of counters handed on under a fence and not in memory here: the receiver
// counted them as this node's to write, dropped the fence when it found Redis emptied
// (which took with it the record that makes a call apply once), and writes its memory
// back in full, them included. Sent again, they would count twice (sim seed 2872).
// Those of counters that went without their buckets (sb.partial) stay: the receiver's
// memory lacks them, and no one else writes them (sim seed 1766). The caller holds mu.
func (o *Owner) dropHandedOn(sb *sentBatch) {
	rg := o.ring.Load()
	if sb.orphaned == nil || rg == nil {
		return
	}
	orphaned := sb.orphaned
	sb.orphaned = nil
	n := o.cfg.Redis.Rewrite(sb.b, func(d fallback.Delta) (fallback.Delta, bool) {
		return d, !orphaned.Has(rg.Partition(d.Key)) || o.cfg.Store.Has(d.Key, d.Spec) ||
			sb.partial[fallback.CounterRef{Key: d.Key, Spec: d.Spec}]
	})
	if n > 0 {
		o.cfg.Logger.Warn("Redis lost its data: write-behind in doubt of counters handed on is left to their new owners, who write them back in full", "deltas", n)
	}
}

// takeHeld takes into memory, as Redis lost its data, the counters held for fences
// (hold) of the partitions this node owns: Redis has none of their counts now, nor
// will the senders' writes in doubt bring theirs (dropHandedOn), so they are written
// back in full as they came (reseedDue, the partitions being due), the best there is.
// Those of partitions on their way out through Redis go with their release's counters.
// The caller holds mu, in reseed, before the releases' counters are written back.
func (o *Owner) takeHeld(held map[int][]HandoffCounter) int {
	n := 0
	for _, p := range sortedKeys(held) {
		switch st := o.parts.get(p); st {
		case Owned, Stale:
			for _, c := range held[p] {
				if o.cfg.Store.Seed(c.Key, c.Spec, c.Buckets) {
					n++
				}
			}
		case Releasing, ReleasingStale:
			for _, rel := range o.releases.jobs {
				if rel.persist && containsInt(rel.parts, p) {
					rel.ev = withHeld(rel.ev, held[p])
					n += len(held[p])
				}
			}
		}
	}
	return n
}

// withHeld adds to ev, counters leaving memory, the counters held for fences (hold)
// that are not in memory: with their buckets, which include their pending part.
func withHeld(ev []leaparray.Evicted, held []HandoffCounter) []leaparray.Evicted {
	for _, c := range held {
		i := slices.IndexFunc(ev, func(e leaparray.Evicted) bool { return e.Key == c.Key && e.Spec == c.Spec })
		switch {
		case i < 0:
			ev = append(ev, leaparray.Evicted{Key: c.Key, Spec: c.Spec, Buckets: c.Buckets})
		case len(ev[i].Buckets) == 0:
			ev[i].Buckets = c.Buckets // it left as its pending part alone
		}
	}
	return ev
}
