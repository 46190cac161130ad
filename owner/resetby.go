package owner

import (
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/lease"
)

// Deadlines on resets. A reset erases what Redis holds of a counter. Sent under this
// node's lease, it may still run in Redis after the lease ended (Redis slow, the call
// on the wire where stripLateResets cannot reach it), once the partition's next owner
// may have written the counter: run then, it would erase those writes. So each reset
// goes with a deadline on Redis's clock (fallback.Delta.ResetBy), the lease's end as
// Redis's clock will show it at the earliest, and Redis merges one that comes later
// without its reset. Redis's clock is read from the write-behind's own replies
// (fallback.Batch.RedisTime: the clock the script compares with), and from the clock
// watch's TIME once a second (clock.go), so that an owner that wrote nothing for a
// while has a recent reading too.
//
// A reset Redis did not apply, or may not have, while this node still holds its
// counter leaves Redis without the reset that memory holds: it is sent again
// (lateResetsDone).

// redisReading is a reading of Redis's clock.
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
// the end of this node's lease of p, at the earliest, from the later of the last two
// readings of Redis's clock, the write-behind's and the clock watch's (clock.go); 0
// (none) without either, or without a lease. Each reading is a bound however old: its
// age only takes resetDrift of it off the deadline. The caller holds mu.
func (o *Owner) resetDeadline(p int) int64 {
	until := o.cfg.Leases.Until(p)
	if until <= 0 {
		return 0
	}
	by := deadlineFrom(o.redisNow, until)
	if r := o.clock.reading.Load(); r != nil {
		by = max(by, deadlineFrom(*r, until))
	}
	return by
}

// deadlineFrom is Redis's clock at until, at the earliest, by reading r; 0 without r.
func deadlineFrom(r redisReading, until time.Duration) int64 {
	if r.us == 0 {
		return 0
	}
	left := min(until-r.at, resetDeadlineMax)
	return r.us + int64(float64(left/time.Microsecond)*(1-resetDrift))
}

// lateResetsDone sends again, as whole states (Base), the resets of sb that Redis did
// not apply, or may not have (past their deadline), of counters whose lease this node
// still holds: memory holds the reset, Redis the counts before it. A reset delta and
// the counter's deltas after it in sb hold all it had since the reset, so sent again
// (fallback.LateStates) they make Redis hold that whatever the first send did; what
// came after sb is queued or pending behind them. As a Base it is dropped, not
// stripped of its reset, should the lease lapse before it goes: stripped, its counts
// would count twice. One whose lease lapsed is another node's now, and left as a late
// reset is (stripLateResets). The caller holds mu.
func (o *Owner) lateResetsDone(sb *sentBatch) {
	late := sb.b.LateResets()
	rg := o.ring.Load()
	if len(late) == 0 || rg == nil {
		return
	}
	now := o.cfg.Clock.Since()
	var again []fallback.Delta
	for _, d := range late {
		if p := rg.Partition(d.Key); !sb.lapsed.Has(p) && o.cfg.Leases.Holds(p, now) {
			again = append(again, d)
		}
	}
	if len(again) > 0 {
		o.flush.enqueueOlder(again) // (ahead of what its counters queued since)
		o.kick()                    // (the flush under way may have drained already)
		o.cfg.Logger.Warn("resets Redis ran past their deadline, or may have, while this node held their counters: sent again", "counters", len(again))
	}
}
