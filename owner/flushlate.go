package owner

import (
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// Late resets: a reset decided under a lease that lapsed before Redis confirmed it must not
// erase what another node decided since. The write-behind strips such resets as a batch
// goes, and drops them from what waits when the lease lapses.

// stripLateResets takes out of sb what this node may not write now: a reset of a
// counter whose partition's lease lapsed after the reset was decided (another node may
// have decided the counter since, and written it: a reset landing after the other's
// writes would erase them) goes without its reset (what it erased may then come back,
// docs/guarantees.md; never what another node counted), and a whole state written back
// after Redis lost its data (writeback.go) does not go at all (the decider writes its own).
// A reset of a partition this node owns and does not hold the lease of now (its lease
// is ending, or, for counters handed to it, not granted yet) waits in the queue: written
// while it is held, or stripped if the lease lapses first (dropLateResets). Any other
// partition's is stripped. The caller holds mu.
func (o *Owner) stripLateResets(sb *sentBatch) {
	rg := o.ring.Load()
	if rg == nil {
		return
	}
	now := o.cfg.Clock.Since()
	var later []fallback.Delta
	stripped := 0
	o.cfg.Redis.Rewrite(sb.b, func(d fallback.Delta) (fallback.Delta, bool) {
		p := rg.Partition(d.Key)
		lapsed := sb.lapsed.Has(p)
		switch {
		case d.WriteBack && sb.staleBases.Has(p):
			stripped++
			return d, false // its memory lacks a late write, which the reset would erase
		case !d.Reset:
			return d, true
		case !lapsed && o.cfg.Leases.Holds(p, now):
			if d.ResetBy == 0 { // (its first send's stays: resetby.go)
				d.ResetBy = o.resetDeadline(p)
			}
			return d, true
		case !lapsed && o.parts.get(p).waitsForLease():
			later = append(later, d)
			return d, false
		case d.Base:
			stripped++
			return d, false
		}
		stripped++
		d.Reset = false
		return d, true
	})
	if len(later) > 0 {
		o.flush.enqueueOlder(later)
	}
	if stripped > 0 {
		o.cfg.Logger.Warn("resets not written before this node's lease ended are dropped: what they erased may come back", "deltas", stripped)
	}
}

// dropLateResets makes the resets of partitions ps, decided before their lease ended
// and not yet confirmed in Redis, go without their reset (stripLateResets): those
// pending in the store are drained now (what is decided after a new grant is not
// touched), those queued lose it at once, those in batches when they go next, and those
// on their way to a new owner in a release before they are handed on
// (dropReleasedResets). The caller holds mu.
func (o *Owner) dropLateResets(ps lease.Set) {
	rg := o.ring.Load()
	if o.cfg.Redis == nil || rg == nil || ps.Len() == 0 {
		return
	}
	for _, sb := range o.flush.batches {
		if sb.lapsed == nil {
			sb.lapsed = lease.NewSet(rg.PartitionCount())
		}
		ps.Each(sb.lapsed.Add)
	}
	var ds []fallback.Delta
	for _, d := range o.cfg.Store.DrainMatching(func(k string) bool { return ps.Has(rg.Partition(k)) }, nil) {
		ds = append(ds, fallback.Delta{Key: d.Key, Spec: d.Spec, Buckets: d.Buckets})
	}
	f := &o.flush
	f.mu.Lock()
	kept := f.queue[:0]
	for _, d := range f.queue {
		switch {
		case !ps.Has(rg.Partition(d.Key)) || !d.Reset:
		case d.Base:
			f.unref([]fallback.CounterRef{refOf(d)})
			continue // late: another node may decide it now (writeback.go)
		default:
			d.Reset = false
		}
		kept = append(kept, d)
	}
	f.queue = kept
	f.reindexQueue()
	f.mu.Unlock()
	f.enqueue(ds)
	if n := o.dropReleasedResets(rg, ps); n > 0 {
		o.cfg.Logger.Warn("resets on their way to a new owner dropped: this node's lease ended before they were handed on; what they erased may come back", "counters", n)
	}
}

// dropStaleBases drops the whole states of partitions ps, written back after Redis lost
// its data (writeback.go), that have not gone yet: another node's write of their
// counters landed late (late.go), and the memory they come from lacks it, so their
// reset would erase it. Those queued go at once, those in batches when they go next
// (stripLateResets). What Redis held of these counters before the loss is then lost,
// as docs/guarantees.md says of an owner that finds its memory stale before its
// write-back (TestAWriteBackInFullDoesNotEraseALateWrite). The caller holds mu.
func (o *Owner) dropStaleBases(ps lease.Set) {
	rg := o.ring.Load()
	if o.cfg.Redis == nil || rg == nil || ps.Len() == 0 {
		return
	}
	for _, sb := range o.flush.batches {
		if sb.staleBases == nil {
			sb.staleBases = lease.NewSet(rg.PartitionCount())
		}
		ps.Each(sb.staleBases.Add)
	}
	f := &o.flush
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.queue[:0]
	for _, d := range f.queue {
		if d.WriteBack && ps.Has(rg.Partition(d.Key)) {
			f.unref([]fallback.CounterRef{refOf(d)})
			continue
		}
		kept = append(kept, d)
	}
	f.queue = kept
	f.reindexQueue()
}

// withoutLateResets strips from ds, taken out of a batch, the resets of the partitions
// whose lease lapsed after the batch was made (lapsed, dropLateResets), and drops their
// whole states (returned, to be unreferenced), as stripLateResets does when the batch
// goes: out of it, they would go on as if decided under a lease still held.
func withoutLateResets(ds []fallback.Delta, lapsed lease.Set, rg *ring.Ring) (kept []fallback.Delta, dropped []fallback.CounterRef) {
	if lapsed == nil || lapsed.Len() == 0 || rg == nil {
		return ds, nil
	}
	out := ds[:0]
	for _, d := range ds {
		if d.Reset && lapsed.Has(rg.Partition(d.Key)) {
			if d.Base {
				dropped = append(dropped, refOf(d))
				continue
			}
			d.Reset = false
		}
		out = append(out, d)
	}
	return out, dropped
}

// dropLapsedInDoubt takes out of sb, once Redis lost its data since sb was made, the
// deltas of its calls in doubt (sent, not answered) of partitions whose lease lapsed
// after sb was made. Another node may have been granted such a partition and loaded its
// counters from Redis, those calls applied, before the loss; it then writes its memory
// back in full, them included, and the emptied Redis no longer knows that they applied:
// sent again, they would count twice (TestWriteInDoubtOfALapsedPartitionIsNotSentAgainAfterRedisLostItsData).
// Left out, what they carried is lost only if they had not applied, as Redis emptied
// loses what it held (docs/guarantees.md). Calls never sent stay: no one else has their
// counts. The caller holds mu.
func (o *Owner) dropLapsedInDoubt(sb *sentBatch) {
	rg := o.ring.Load()
	if sb.losses == o.redisEpoch.losses || sb.lapsed == nil || sb.lapsed.Len() == 0 || rg == nil {
		return
	}
	n := o.cfg.Redis.DropInDoubt(sb.b, func(d fallback.Delta) bool { return sb.lapsed.Has(rg.Partition(d.Key)) })
	if n > 0 {
		o.cfg.Logger.Warn("Redis lost its data: write-behind in doubt of partitions whose lease lapsed here is not sent again (another node may hold it and write it back in full)", "deltas", n)
	}
}
