package owner

import (
	"sync/atomic"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/lease"
)

// Late writes. A node whose lease of a partition ran out before Redis confirmed its
// deltas of it (cut off, paused, or Redis down as the lease ran out) wrote them late:
// the partition's next owner may have loaded its counters, or created them without a
// load (loadskip.go), before they landed, and its memory lacks them for good. So once Redis
// confirms a batch, the partitions of it whose lease had ended are marked in Redis
// (fallback.MarkLate), and every owner polls the marks each flush: a partition it holds
// whose mark moved is reloaded from Redis, as after a lapse (lapse.go). Counters handed
// to this node directly (Redis down or slow) came from a memory that may lack such a
// write too: the marks of their partitions count as unseen, so a mark there reloads
// them once Redis has what came with them.
// lateMarks is the marks' poll; what each partition's marks are is its Record's Late.
type lateMarks struct {
	// Under Owner.mu: whether a poll is under way, whether the marks were read since
	// they last counted as unseen, and the marks' sequence then.
	polling bool
	known   bool
	seq     int64

	polls atomic.Uint64 // polls that read Redis (tests wait for one after a write)
}

// noteLate records the partitions of refs whose lease this node no longer holds: Redis
// has just confirmed their deltas, possibly after another node was granted them. The
// caller holds mu.
func (o *Owner) noteLate(refs []fallback.CounterRef) {
	rg := o.ring.Load()
	if rg == nil {
		return
	}
	now := o.cfg.Clock.Since()
	for _, r := range refs {
		p := rg.Partition(r.Key)
		if now >= o.cfg.Leases.Until(p) {
			o.step(p, on(LateWritten))
		}
	}
}

// unmarkedCount is how many partitions' late marks are to be written.
func (o *Owner) unmarkedCount() int {
	n := 0
	for p := range o.parts.rec() {
		if o.parts.at(p).Late.Unmarked {
			n++
		}
	}
	return n
}

// unmarked are the partitions whose late mark is to be written.
func (o *Owner) unmarked() []int {
	var ps []int
	for p := range o.parts.rec() {
		if o.parts.at(p).Late.Unmarked {
			ps = append(ps, p)
		}
	}
	return ps
}

// markLate writes the marks noteLate recorded and reports whether there were any: then
// done hears, under mu, whether they were written. The caller holds mu.
func (o *Owner) markLate(done func(ok bool)) bool {
	ps := o.unmarked()
	if len(ps) == 0 {
		return false
	}
	n := o.ring.Load().PartitionCount()
	o.ask(func() {
		o.cfg.Redis.MarkLate(n, ps, func(err error) {
			o.post(func() { o.markedLate(ps, err, done) })
		})
	})
	return true
}

// markedLate goes on after the marks of ps were written (or not). The caller holds mu.
func (o *Owner) markedLate(ps []int, err error, done func(ok bool)) {
	if err != nil {
		o.cfg.Logger.Debug("late-write marks wait", "partitions", len(ps), "err", err)
		done(false)
		return
	}
	for _, p := range ps {
		o.step(p, on(LateMarked))
	}
	o.cfg.Logger.Warn("deltas written after this node's lease ended: their partitions' owners reload them", "partitions", len(ps))
	done(true)
}

// pollLate reads the late-write marks and makes the partitions this node decides whose
// mark moved stale: they are reloaded from Redis before they are decided again. A mark
// not seen before counts as moved (a node that starts, or whose Redis was away, cannot
// know when it was made); a mark Redis lost (emptied) does not. The caller holds mu.
//
// It runs whether Redis looks up or not: while the breaker is open it fails at once, and
// after each cool-down it is the probe that finds Redis back. Nothing else may call
// Redis meanwhile (counters in memory are decided without it, and with nothing to write
// the write-behind sends nothing), and the node would stay degraded for good.
func (o *Owner) pollLate() {
	rg := o.ring.Load()
	l := &o.late
	if o.cfg.Redis == nil || rg == nil || l.polling {
		return
	}
	since := l.seq
	if !l.known {
		since = -1
	}
	l.polling = true
	n := rg.PartitionCount()
	o.ask(func() {
		o.cfg.Redis.LateMarks(n, since, func(seq int64, marks map[int]int64, err error) {
			o.post(func() { o.polledLate(seq, marks, err) })
		})
	})
}

// polledLate goes on after a poll of the late-write marks. The caller holds mu.
func (o *Owner) polledLate(seq int64, marks map[int]int64, err error) {
	l := &o.late
	l.polling = false
	if err != nil {
		return
	}
	l.polls.Add(1)
	l.known, l.seq = true, seq
	moved, marked := o.marksRead(marks)
	o.dropStaleBases(marked)
	if n := o.markStale(moved, LateWrite); n > 0 {
		o.cfg.Logger.Warn("another node wrote deltas late: these partitions are reloaded from Redis before they are decided again", "partitions", n)
		o.wakeAfter()
	}
}

// marksRead notes the marks a poll read (nil: none changed since the last) and returns
// the partitions to make stale: those to reload at this poll, and those whose mark
// moved; and, of those, the ones whose mark moved (another node's late write landed
// since the last poll, not a reload for want of knowing). The marks read replace those
// known. The caller holds mu.
func (o *Owner) marksRead(marks map[int]int64) (moved, marked lease.Set) {
	moved, marked = lease.NewSet(o.parts.count()), lease.NewSet(o.parts.count())
	for p := range o.parts.rec() {
		r := o.parts.at(p)
		if r.Late.Reload {
			moved.Add(p)
			o.step(p, on(ReloadTaken))
		}
		if marks == nil {
			continue
		}
		m, ok := marks[p]
		if ok && r.Late.Seen != m {
			moved.Add(p)
			marked.Add(p)
		}
		if r.Late.Seen != m {
			o.step(p, Event{Kind: MarkRead, Ms: m})
		}
	}
	return moved, marked
}

// forgetLate makes the late-write marks of ps count as unseen: their counters came
// from another node's memory, which may predate a late write there. The caller holds
// mu.
func (o *Owner) forgetLate(ps []int) {
	if len(ps) == 0 {
		return
	}
	for _, p := range ps {
		o.step(p, on(MarkForgotten))
	}
	o.late.known = false // the next poll reads every mark
}

// reloadWhenBack makes the next poll that reaches Redis reload ps (lateMark.Reload).
// The caller holds mu.
func (o *Owner) reloadWhenBack(ps []int) {
	for _, p := range ps {
		o.step(p, on(ReloadWhenBack))
	}
}

// LatePolls reports how many times this node has read the late-write marks.
func (o *Owner) LatePolls() uint64 { return o.late.polls.Load() }
