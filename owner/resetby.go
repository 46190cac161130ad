package owner

import (
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
)

// Deadlines on resets. A reset erases what Redis holds of a counter. Sent under this
// node's lease, it may still run in Redis after the lease ended (Redis slow, the call
// on the wire where stripLateResets cannot reach it), once the partition's next owner
// may have written the counter: run then, it would erase those writes. So each reset
// goes with a deadline on Redis's clock (fallback.Delta.ResetBy), the lease's end as
// Redis's clock will show it at the earliest, and Redis merges one that comes later
// without its reset. Redis's clock is read from the write-behind's own replies
// (fallback.Batch.RedisTime): the clock the script compares with.
//
// A reset Redis did not apply, or may not have, while this node still holds its
// counter leaves Redis without the reset that memory holds: the counter is written
// back in full (lateResetsDone).

// redisReading is Redis's clock as a write-behind reply read it.
type redisReading struct {
	us int64         // Redis's clock, µs since the Unix epoch (0: none)
	at time.Duration // Clock.Since when this node had it: Redis's clock was at least us then
}

// resetDrift is how much slower Redis's clock may run than this node's monotonic one:
// twice lease.DefaultDrift, the bound leases take between two nodes' clocks.
const resetDrift = 2 * lease.DefaultDrift

// resetDeadlineMax bounds the lease left that a deadline counts (a test's leases run
// for ever).
const resetDeadlineMax = time.Hour

// noteRedisTime keeps the reading of Redis's clock a send's replies carried. The caller
// holds mu.
func (o *Owner) noteRedisTime(b Batch) {
	if us := b.RedisTime(); us > 0 {
		o.redisNow = redisReading{us: us, at: o.cfg.Clock.Since()}
	}
}

// resetDeadline is the deadline of a reset of partition p sent now: Redis's clock at
// the end of this node's lease of p, at the earliest; 0 (none) without a reading of
// Redis's clock from the last clockKnownFor, or without a lease. The caller holds mu.
func (o *Owner) resetDeadline(p int, now time.Duration) int64 {
	r := o.redisNow
	until := o.cfg.Leases.Until(p)
	if r.us == 0 || now-r.at > clockKnownFor || until <= r.at {
		return 0
	}
	left := min(until-r.at, resetDeadlineMax)
	return r.us + int64(float64(left/time.Microsecond)*(1-resetDrift))
}

// lateResetsDone writes back in full the counters of sb whose reset Redis did not
// apply, or may not have (past their deadline), while this node holds them: memory
// holds the reset, Redis the counts before it. One whose lease lapsed since sb was made
// is another node's now: its reset goes as a late one does (stripLateResets). The
// caller holds mu.
func (o *Owner) lateResetsDone(sb *sentBatch) {
	late := sb.b.LateResets()
	rg := o.ring.Load()
	if len(late) == 0 || rg == nil {
		return
	}
	now := o.cfg.Clock.Since()
	held := map[fallback.CounterRef]bool{} // true once its base is found
	for _, d := range late {
		p := rg.Partition(d.Key)
		if !sb.lapsed.Has(p) && o.cfg.Leases.Holds(p, now) && o.parts.at(p).State == Owned && !o.startedBlind(p, d.Key) {
			held[refOf(d)] = false
		}
	}
	if len(held) == 0 {
		return
	}
	var ds []fallback.Delta
	o.cfg.Store.Bases(func(key string) bool {
		for ref := range held { // (a handful)
			if ref.Key == key {
				return true
			}
		}
		return false
	}, func(key string, sp leaparray.Spec, base []leaparray.Bucket) {
		ref := fallback.CounterRef{Key: key, Spec: sp}
		if _, ok := held[ref]; ok {
			held[ref] = true
			ds = append(ds, fallback.Delta{Key: key, Spec: sp, Buckets: base, Reset: true, Base: true, WriteBack: true})
		}
	})
	for ref, found := range held {
		if !found { // not in memory: nothing since the reset, which is all it holds
			ds = append(ds, fallback.Delta{Key: ref.Key, Spec: ref.Spec, Reset: true, Base: true, WriteBack: true})
		}
	}
	o.flush.enqueue(ds)
	o.cfg.Logger.Warn("resets Redis ran past their deadline, or may have, while this node held their counters: those are written back in full", "counters", len(ds))
}
