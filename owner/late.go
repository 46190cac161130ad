package owner

import (
	"context"
	"sync/atomic"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/lease"
)

// Late writes. A node whose lease of a partition ran out before Redis confirmed its
// deltas of it (cut off, paused, or Redis down as the lease ran out) wrote them late:
// the partition's next owner may have loaded its counters, or created them without a
// load (fresh.go), before they landed, and its memory lacks them for good. So once Redis
// confirms a batch, the partitions of it whose lease had ended are marked in Redis
// (fallback.MarkLate), and every owner polls the marks each flush: a partition it holds
// whose mark moved is reloaded from Redis, as after a lapse (lapse.go). Counters handed
// to this node directly (Redis down or slow) came from memory that may lack such a write
// too, and are reloaded once Redis has confirmed what came with them (refresh,
// cleanStale).
type lateMarks struct {
	// Under flusher.running: the partitions whose late write is confirmed and not yet
	// marked.
	unmarked map[int]bool
	pending  atomic.Int64 // len(unmarked), for Unwritten

	// Used by Run's goroutine only: the marks' sequence and marks last read.
	known bool
	seq   int64
	seen  map[int]int64

	polls atomic.Uint64 // polls that read Redis (tests wait for one after a write)
}

// noteLate records the partitions of refs whose lease this node no longer holds: Redis
// has just confirmed their deltas, possibly after another node was granted them.
// Called under flusher.running.
func (o *Owner) noteLate(refs []fallback.CounterRef) {
	rg := o.ring.Load()
	if rg == nil {
		return
	}
	now := o.cfg.Leases.Now()
	for _, r := range refs {
		p := rg.Partition(r.Key)
		if now >= o.cfg.Leases.Until(p) {
			if o.late.unmarked == nil {
				o.late.unmarked = map[int]bool{}
			}
			o.late.unmarked[p] = true
		}
	}
	o.late.pending.Store(int64(len(o.late.unmarked)))
}

// markLate writes the marks noteLate recorded, and reports whether none is left.
// Called under flusher.running.
func (o *Owner) markLate(ctx context.Context) bool {
	if len(o.late.unmarked) == 0 {
		return true
	}
	ps := make([]int, 0, len(o.late.unmarked))
	for p := range o.late.unmarked {
		ps = append(ps, p)
	}
	if err := o.cfg.Redis.MarkLate(ctx, o.ring.Load().PartitionCount(), ps); err != nil {
		o.cfg.Logger.Debug("late-write marks wait", "partitions", len(ps), "err", err)
		return false
	}
	o.late.unmarked = nil
	o.late.pending.Store(0)
	o.cfg.Logger.Warn("deltas written after this node's lease ended: their partitions' owners reload them", "partitions", len(ps))
	return true
}

// pollLate reads the late-write marks and makes the partitions this node decides whose
// mark moved stale: they are reloaded from Redis before they are decided again. A mark
// not seen before counts as moved (a node that starts, or whose Redis was away, cannot
// know when it was made); a mark Redis lost (emptied) does not.
//
// It runs whether Redis looks up or not: while the breaker is open it fails at once, and
// after each cool-down it is the probe that finds Redis back. Nothing else may call
// Redis meanwhile (counters in memory are decided without it, and with nothing to write
// the write-behind sends nothing), and the node would stay degraded for good.
func (o *Owner) pollLate(ctx context.Context) {
	rg := o.ring.Load()
	if o.cfg.Redis == nil || rg == nil {
		return
	}
	l := &o.late
	since := l.seq
	if !l.known {
		since = -1
	}
	seq, marks, err := o.cfg.Redis.LateMarks(ctx, rg.PartitionCount(), since)
	if err != nil {
		return
	}
	defer l.polls.Add(1)
	l.known, l.seq = true, seq
	if marks == nil {
		return
	}
	moved := lease.NewSet(rg.PartitionCount())
	for p, m := range marks {
		if l.seen[p] != m && p >= 0 && p < rg.PartitionCount() {
			moved.Add(p)
		}
	}
	l.seen = marks
	if n := o.markStale(moved); n > 0 {
		o.cfg.Logger.Warn("another node wrote deltas late: these partitions are reloaded from Redis before they are decided again", "partitions", n)
	}
}

// Unwritten reports how many counters have deltas Redis has not confirmed, and how many
// partitions' late-write marks are not written yet (not counting what the counters
// gained since the last flush, written at the next).
func (o *Owner) Unwritten() int {
	o.flush.mu.Lock()
	n := len(o.flush.refs)
	o.flush.mu.Unlock()
	return n + int(o.late.pending.Load())
}

// LatePolls reports how many times this node has read the late-write marks.
func (o *Owner) LatePolls() uint64 { return o.late.polls.Load() }

// refreshKeys are, per partition, the counters handed to this node directly: their
// memory came from a node whose own may lack a late write, so once Redis confirms what
// came with them (their pending part written, the fences reached) they are dropped and
// reloaded. Unlike blind counters they are decided meanwhile: their memory is the best
// there is, and holds every count its sender decided.
type refreshKeys struct{ blindKeys }

// parts returns the partitions with counters to refresh.
func (r *refreshKeys) parts() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int, 0, len(r.by))
	for p := range r.by {
		out = append(out, p)
	}
	return out
}
