package owner

import (
	"errors"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
)

// Redis that loses its data (restarted without persistence, FLUSHALL, a failover to a
// stale replica) loses every counter's state but the deltas written since. Memory still
// holds the counters of the partitions this node owns, and writes them back in full
// (writeBackInFull): else a counter that later moves through Redis (a join, a leave) or is
// reloaded would lose everything before the loss, though it was in memory throughout.
// The loss shows in the partition stamps' epoch (fallback.StampWritten): every Tick
// reads it, and a release through Redis reads it once more after Redis confirmed its
// deltas, before it lets its partitions go.

// redisEpochWatch is what this node knows of the stamps' epoch. Under Owner.mu.
type redisEpochWatch struct {
	checking bool
	losses   int
	last     string // the epoch known before the last write-back in full (Handoff.RedisEpoch meanwhile)
}

// checkEpoch reads the stamps' epoch (unless a read is under way), writes memory back in full if Redis
// lost its data, and calls then, under mu, with whether Redis still holds what this
// node wrote (then may be nil). The caller holds mu.
func (o *Owner) checkEpoch(then func(kept bool)) {
	rg := o.ring.Load()
	if o.cfg.Redis == nil || rg == nil {
		if then != nil {
			then(true)
		}
		return
	}
	if then == nil && o.redisEpoch.checking {
		return
	}
	o.redisEpoch.checking = then == nil
	asked, n := o.flush.epoch, rg.PartitionCount()
	o.ask(func() {
		o.cfg.Redis.Epoch(n, func(e string, err error) {
			o.post(func() { o.epochRead(asked, e, err, then) })
		})
	})
}

// epochRead goes on after a read of the stamps' epoch, asked while the epoch known was
// asked. The caller holds mu.
func (o *Owner) epochRead(asked, e string, err error, then func(kept bool)) {
	if then == nil {
		o.redisEpoch.checking = false
	}
	if err == nil && o.flush.epoch != asked {
		// A stamp answered meanwhile: the read may predate it, and says nothing.
		err = errEpochMoved
	}
	kept := false
	switch {
	case err != nil:
	case o.flush.epoch == "" && o.redisEpoch.losses > 0 && !o.flush.empty():
		// Being written back: the stamp of that write adopts the new epoch; until
		// it is confirmed nothing may be dropped to be reloaded.
	case o.sameEpoch(e):
		kept = true
	default:
		o.writeBackInFull()
	}
	if then != nil {
		then(kept)
	}
}

// errEpochMoved is a read of the epoch that a stamp overtook.
var errEpochMoved = errors.New("owner: the stamps' epoch moved while it was read")

// sameEpoch reports whether e is the epoch this node knows; one it knew none of is
// taken as known (it wrote nothing yet).
func (o *Owner) sameEpoch(e string) bool {
	f := &o.flush
	if f.epoch == "" {
		f.epoch = e
		return true
	}
	return e == f.epoch
}

// writeBackInFull writes behind the whole state (but what is still pending, which follows as
// usual) of every counter of the partitions this node decides now, and of those on their
// way out through Redis, each as a reset followed by that state (a Base delta): what
// memory holds is then what Redis holds. Partitions it owns but does not decide now
// (no lease yet, stale memory) are written once it decides them (writeBackDue): another
// node may decide them meanwhile, and writes its own. Stale ones whose lease lapsed here
// are not written: their memory is dropped and reloaded (cleanDrop), since another node
// may have written to the emptied Redis meanwhile. The caller holds mu.
func (o *Owner) writeBackInFull() {
	for p := range o.parts.rec() {
		o.step(p, on(RedisLost))
	}
	n := o.writeBackDue()
	fenced, held := o.clearFences()
	n += o.takeHeld(held)
	rg := o.ring.Load()
	for _, rel := range o.releases.jobs {
		if rel.persist {
			var ds []fallback.Delta
			for _, e := range rel.ev {
				if rg != nil && rel.partial.has(rg.Partition(e.Key), e.Key) {
					continue // started blind, or stale: its memory lacks what Redis holds
				}
				// All its buckets: its pending part is queued ahead of this.
				ds = append(ds, fallback.Delta{Key: e.Key, Spec: e.Spec, Buckets: e.Buckets, Reset: true, Base: true, WriteBack: true})
			}
			o.flush.enqueue(ds)
			n += len(ds)
			rel.epochOK = false
		}
	}
	for _, sb := range o.flush.batches {
		orphanSentInHandoffs(sb)
	}
	if fenced > 0 {
		o.cfg.Logger.Warn("Redis lost its data: the writes in doubt that held loads back cannot be seen reached any more; loads go on", "partitions", fenced)
	}
	if o.flush.epoch != "" {
		o.redisEpoch.last = o.flush.epoch
	}
	o.flush.epoch = "" // the next stamp adopts the new epoch, and stamps every partition
	o.forgetStamps()
	o.late.known = false
	o.redisEpoch.losses++
	o.kick()
	o.cfg.Logger.Warn("Redis lost its data: the counters in memory are written back in full", "counters", n)
}

// handoffRedisEpoch is the epoch a Handoff names (Handoff.RedisEpoch): the one this node knows,
// or, while it writes its memory back after Redis lost its data, the one it knew
// before. The caller holds mu.
func (o *Owner) handoffRedisEpoch() string {
	if o.cfg.Redis == nil {
		return ""
	}
	if o.flush.epoch != "" {
		return o.flush.epoch
	}
	return o.redisEpoch.last
}

// tookInRedisEpoch is told of counters of partitions ps handed to this node by a sender that
// knew Redis at epoch e. A node that knew no epoch (it wrote nothing yet) takes e: its
// next check of Redis's tells whether Redis lost its data since, and then it writes
// back all it holds. One that knows another writes these partitions back in full once
// it decides them: Redis may have lost their state between the two epochs, unseen by
// the sender (it handed them on while Redis was down, say). The caller holds mu.
func (o *Owner) tookInRedisEpoch(e string, ps []int) {
	switch {
	case e == "" || e == o.flush.epoch:
		return
	case o.flush.epoch == "" && o.redisEpoch.losses == 0:
		o.flush.epoch = e
		return
	}
	for _, p := range ps {
		o.step(p, on(RedisLost))
	}
	o.cfg.Logger.Warn("counters handed over from a node that knew Redis at another epoch: they are written back in full", "partitions", len(ps))
}

// writeBackDue writes back the counters of the partitions due a write-back in full that this node
// decides now, and returns how many. The caller holds mu.
func (o *Owner) writeBackDue() int {
	rg := o.ring.Load()
	ready := lease.NewSet(o.parts.count())
	for p := range o.parts.rec() {
		switch r := o.parts.at(p); {
		case !r.Due:
		case r.State == Idle:
			o.step(p, on(WroteBack)) // nothing of it is here
		case o.fenced(p):
			// A write in doubt may still land: written back before it, its counts would
			// count twice; it waits until the fence is reached or expires.
		case r.State == Owned && o.cfg.Leases.Holds(p, o.cfg.Clock.Since()):
			// This node alone decides it (blind counters aside, which are skipped).
			ready.Add(p)
			o.step(p, on(WroteBack))
		}
	}
	if ready.Len() == 0 {
		return 0
	}
	var ds []fallback.Delta
	o.cfg.Store.Bases(func(key string) bool {
		p := rg.Partition(key)
		// A counter started blind lacks what Redis held: it is reloaded, not written.
		return ready.Has(p) && !o.startedBlind(p, key)
	},
		func(key string, sp leaparray.Spec, base []leaparray.Bucket) {
			ds = append(ds, fallback.Delta{Key: key, Spec: sp, Buckets: base, Reset: true, Base: true, WriteBack: true})
		})
	o.flush.enqueue(ds)
	return len(ds)
}

// RedisLosses reports how many times this node found that Redis lost its data.
func (o *Owner) RedisLosses() int {
	o.lock()
	defer o.unlock()
	return o.redisEpoch.losses
}
