package owner

import (
	"slices"
	"time"

	"github.com/leapcount/leapcount/fallback"
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
// Redis loses its data (writeBackInFull), marks included.
//
// A counter handed over under a fence that the receiver did not take into memory (it
// loads from Redis, which may hold newer counts than the sender's: receive.go) is held
// beside its fences as it came, until they are reached. Should Redis lose its data
// first, the sender does not send its call again (dropSentInHandoffs: it leaves the counts
// to the receiver's memory, unless the counter went without its buckets), and a load
// from the emptied Redis would have none of them, so the receiver takes the counter
// into memory as it came and writes it back in full (takeHeld;
// TestFencedCountersTakenFromRedisAreWrittenBackWhenRedisLostItsData).

// fenceMax bounds how long a fence holds loads back.
const fenceMax = time.Minute

// fenceSet is a partition's fences (Record.Fenced). Like the Record, it never changes
// once stored: Step makes another.
type fenceSet struct {
	fs    []fallback.Fence
	since time.Duration // Clock.Since when the first came
	held  []HandoffCounter
}

// withFences is set with the fences fs added (a new set since at, when set is nil).
func (set *fenceSet) withFences(fs []HandoffFence, at time.Duration) *fenceSet {
	out := &fenceSet{since: at}
	if set != nil {
		*out = *set
		out.fs = slices.Clone(set.fs)
	}
	for _, h := range fs {
		fe := fallback.Fence{WriterKey: h.WriterKey, Seq: h.Seq}
		if !slices.Contains(out.fs, fe) {
			out.fs = append(out.fs, fe)
		}
	}
	return out
}

// holding is set with c held beside it (in place of an earlier copy of c).
func (set *fenceSet) holding(c HandoffCounter) *fenceSet {
	out := *set
	out.held = slices.DeleteFunc(slices.Clone(set.held), func(h HandoffCounter) bool { return h.Key == c.Key && h.Spec == c.Spec })
	out.held = append(out.held, c)
	return &out
}

// without is set without the fences of the writers in gone (nil: none left).
func (set *fenceSet) without(gone []HandoffFence) *fenceSet {
	out := *set
	out.fs = slices.DeleteFunc(slices.Clone(set.fs), func(fe fallback.Fence) bool {
		return slices.Contains(gone, HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq})
	})
	if len(out.fs) == 0 {
		return nil
	}
	return &out
}

// addFences records fs on partitions ps at now.
func (o *Owner) addFences(ps []int, fs []HandoffFence, now time.Duration) {
	if len(fs) == 0 {
		return
	}
	for _, p := range ps {
		o.step(p, Event{Kind: FencesIn, Fences: fs, At: now})
	}
}

// holdFenced keeps c, handed over under the fences of its partition p and not taken
// into memory, until they are reached or Redis loses its data (takeHeld). A no-op for a
// partition without fences.
func (o *Owner) holdFenced(p int, c HandoffCounter) {
	c.Pending, c.Reset = nil, false // (its buckets hold both)
	o.step(p, Event{Kind: FenceHeld, Counter: &c})
}

// heldOf returns the counters held for partitions ps.
func (o *Owner) heldOf(ps []int) []HandoffCounter {
	var out []HandoffCounter
	for _, p := range ps {
		if set := o.parts.at(p).Fenced; set != nil {
			out = append(out, set.held...)
		}
	}
	return out
}

// fenced reports whether loads of partition p wait for a fence.
func (o *Owner) fenced(p int) bool {
	if mutate.On(mutate.IgnoreFence) {
		return false
	}
	return o.parts.at(p).Fenced != nil
}

// fencesOf returns the fences of partitions ps, once each; drop forgets them.
func (o *Owner) fencesOf(ps []int, drop bool) []HandoffFence {
	var out []HandoffFence
	for _, p := range ps {
		set := o.parts.at(p).Fenced
		if set == nil {
			continue
		}
		for _, fe := range set.fs {
			h := HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq}
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
		if drop {
			o.step(p, on(FencesDropped))
		}
	}
	return out
}

// clearFences drops every fence and returns how many partitions had some, and the
// counters held for them by partition: Redis lost its data, the marks that would show
// them reached with it, and a counter loaded now may lose what Redis lost anyway
// (docs/guarantees.md: Redis emptied). The caller holds mu.
func (o *Owner) clearFences() (int, map[int][]HandoffCounter) {
	n := 0
	var held map[int][]HandoffCounter
	for p := range o.parts.rec() {
		set := o.parts.at(p).Fenced
		if set == nil {
			continue
		}
		n++
		if len(set.held) > 0 {
			if held == nil {
				held = map[int][]HandoffCounter{}
			}
			held[p] = set.held
		}
		o.step(p, on(FencesDropped))
	}
	return n, held
}

// expireFences drops the fences older than fenceMax, whatever reads them (a partition
// never loaded again would keep them for good), and those whose writer's run is over
// (writerGone). The caller holds mu.
func (o *Owner) expireFences(now time.Duration) {
	for p := range o.parts.rec() {
		set := o.parts.at(p).Fenced
		if set == nil {
			continue
		}
		if now-set.since > fenceMax {
			o.cfg.Logger.Warn("write-behind of counters handed over not confirmed in Redis in time: what it carried is lost",
				"partition", p, "fences", len(set.fs))
			o.step(p, on(FencesDropped))
			continue
		}
		var gone []HandoffFence
		for _, fe := range set.fs {
			if o.writerGone(fe.WriterKey) {
				gone = append(gone, HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq})
			}
		}
		if len(gone) > 0 {
			o.step(p, Event{Kind: FencesGone, Fences: gone})
			o.cfg.Logger.Warn("write-behind in doubt of a node whose run is over: what it did not apply is lost",
				"partition", p, "fences", len(gone))
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
		return run < o.cfg.Incarnation
	}
	return o.cfg.Leases.LeftRun(name) == run || o.cfg.Leases.Incarnation(name) > run
}

// reached asks Redis whether partition p has no fence left unreached and calls done
// with the answer (true at once for a partition without fences); reached fences are
// forgotten. done may run before reached returns.
func (o *Owner) reached(p int, done func(bool)) {
	set := o.parts.at(p).Fenced
	if set == nil {
		done(true)
		return
	}
	o.cfg.Redis.Reached(set.fs, func(ok bool, err error) {
		if err != nil || !ok {
			done(false)
			return
		}
		o.step(p, Event{Kind: FencesReached, Count: uint64(len(set.fs))})
		done(true)
	})
}

// ownFences are the fences of this node's write-behind calls in doubt that carry
// deltas of counters of the partitions in set, which are handed on (partial: those
// whose memory goes without its buckets; reset: those whose pending part goes with a
// reset): the batches note it (dropSentInHandoffs). The caller holds mu, with no flush in
// flight (a send changes its calls' states).
func (o *Owner) ownFences(rg *ring.Ring, set lease.Set, partial partialMemory, reset map[fallback.CounterRef]bool) []HandoffFence {
	var out []HandoffFence
	for _, sb := range o.flush.batches {
		fs := sb.b.Fences(func(d fallback.Delta) bool { return set.Has(rg.Partition(d.Key)) })
		for _, fe := range fs {
			out = append(out, HandoffFence{WriterKey: fe.WriterKey, Seq: fe.Seq})
		}
		if len(fs) > 0 {
			if sb.handed == nil {
				sb.handed = lease.NewSet(o.parts.count())
			}
			set.Each(func(p int) {
				sb.handed.Add(p)
				sb.markPartial(rg, p, partial.stale[p], func(key string) bool { return partial.has(p, key) })
			})
			for _, ref := range sb.refs {
				if reset[ref] {
					if sb.subsumed == nil {
						sb.subsumed = map[fallback.CounterRef]bool{}
					}
					sb.subsumed[ref] = true
				}
			}
		}
	}
	return out
}

// sentWithoutBuckets notes that the counter c of partition p, on its way to a new
// owner, now goes without its buckets (releaseStale). The caller holds mu.
func (o *Owner) sentWithoutBuckets(p int, c *HandoffCounter) {
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

// orphanSentInHandoffs marks, as Redis lost its data, the deltas of sb handed on so far for
// dropSentInHandoffs. The caller holds mu.
func orphanSentInHandoffs(sb *sentBatch) {
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

// dropSentInHandoffs takes out of sb, once Redis lost its data since they were handed on,
// the deltas of counters handed on under a fence and not in memory here: the receiver
// counted them as this node's to write, dropped the fence when it found Redis emptied
// (which took with it the record that makes a call apply once), and writes its memory
// back in full, them included. Sent again, they would count twice
// (TestWriteInDoubtOfCountersSentInAHandoffIsNotSentAgainAfterRedisLostItsData).
// Those of counters that went without their buckets (sb.partial) stay: the receiver's
// memory lacks them, and no one else writes them.
//
// It also takes out, once Redis lost its data since sb was made, the deltas of counters
// handed on with a reset after them (sb.subsumed: their pending part went with a reset,
// a client's or a write-back in full after the loss): what their receiver writes, that
// reset first, erases them or holds them already, and the emptied Redis no longer
// knows whether they applied. Sent again after the receiver's write, they would count
// twice (TestWriteInDoubtIsNotSentAgainOverAWriteBackSentInAHandoff). The caller holds mu.
func (o *Owner) dropSentInHandoffs(sb *sentBatch) {
	rg := o.ring.Load()
	subsumed := sb.subsumed
	if sb.losses == o.redisEpoch.losses {
		subsumed = nil // Redis still knows which of its calls applied: each applies once
	}
	if sb.orphaned == nil && subsumed == nil || rg == nil {
		return
	}
	orphaned := sb.orphaned
	sb.orphaned = nil
	if subsumed != nil {
		sb.subsumed = nil
	}
	n := o.cfg.Redis.Rewrite(sb.b, func(d fallback.Delta) (fallback.Delta, bool) {
		ref := fallback.CounterRef{Key: d.Key, Spec: d.Spec}
		if subsumed[ref] {
			return d, false
		}
		return d, !orphaned.Has(rg.Partition(d.Key)) || o.cfg.Store.Has(d.Key, d.Spec) || sb.partial[ref]
	})
	if n > 0 {
		o.cfg.Logger.Warn("Redis lost its data: write-behind in doubt of counters handed on is left to their new owners, who write them back in full", "deltas", n)
	}
}

// takeHeld takes into memory, as Redis lost its data, the counters held for fences
// (hold) of the partitions this node owns: Redis has none of their counts now, nor
// will the senders' writes in doubt bring theirs (dropSentInHandoffs), so they are written
// back in full as they came (writeBackDue, the partitions being due), the best there is.
// Those of partitions on their way out through Redis go with their release's counters.
// The caller holds mu, in writeBackInFull, before the releases' counters are written back.
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
