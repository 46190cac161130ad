package owner

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// freshMargin is slack added to every span the load skip below measures, and how far
// the counters' clock may be from Redis's for this node to skip loads at all
// (clockAgrees). The skip does not rely on the nodes' clocks agreeing: a counter's
// buckets are placed by the clock of the node that counted them, and each partition's
// stamp is at least the newest bucket its writer sent (stamp), so a reader compares
// stamps with its own clock as it compares those buckets with its own window.
const freshMargin = 5 * time.Second

// decidedSince is when (counters' clock, ms) this node began deciding a partition in
// its current state: the first op it decided there since the state last changed. Any
// change (lost, lapsed, reloaded, lent) starts it again.
type decidedSince struct {
	gen   atomic.Uint64 // the partition's generation + 1 it was taken in; 0: never
	since atomic.Int64
	// quietGen is the partition's generation + 1 in which its stamp (when Redis last
	// got a write of it: fallback.Written) was read, quietAt (0: never written).
	quietGen atomic.Uint64
	quietAt  atomic.Int64
	// departed counts the writes Redis confirmed of p's counters that had left memory
	// (the pending part of a counter dropped to be reloaded, say): Redis then holds what
	// memory does not, and a stamp read before such a write says nothing of it.
	// quietDeparted is departed when the stamp was read.
	departed      atomic.Uint64
	quietDeparted atomic.Uint64
	// departedAt is when (counters' clock, ms) Redis last confirmed such a write: Redis
	// holds it whatever the stamps say (a write landing after Redis lost the stamp that
	// came before it is stamped again only within stampEvery).
	departedAt atomic.Int64
	// gainedDeparted is departed when this node last gained p: a Handoff's counter
	// sent from another node's memory lacks what this node wrote of p since (receive.go).
	gainedDeparted atomic.Uint64
	// before is the lowest of p's stamps read in generation beforeGen - 1 (0: none).
	// Stamps only rise, so it is no lower than every stamp made before this node began
	// deciding p in that generation: by other writers, each on its own clock, at least
	// the newest bucket it sent then (the "since" ground of knowsAllOf).
	beforeGen atomic.Uint64
	before    atomic.Int64
}

// forget makes p's memory count as come from elsewhere (a Handoff installed counters
// whose writes may land later): no load is skipped on what was known of it.
func (d *decidedSince) forget() {
	d.gen.Store(0)
	d.quietGen.Store(0)
}

// noteDecided records that p is decided now, in its current generation. Called with
// decide held shared, so the generation cannot change meanwhile.
func (o *Owner) noteDecided(p int) {
	d := &o.parts.decided[p]
	g := o.parts.gen[p].Load() + 1
	if d.gen.Load() != g {
		d.since.Store(o.cfg.Now()) // before gen: who sees the new gen sees this since
		d.gen.Store(g)
	}
}

// knowsAllOf reports whether Redis can hold nothing in the window (windowMs) of a
// counter of partition p that is not in memory, so that its load can be skipped (issue:
// a flood of new keys cost a Redis round trip each). Either of two things tells:
//   - this node has decided p without a break for longer than that window (plus
//     freshMargin), counted from when it began or from p's stamp as first read in this
//     generation (plus stampEvery), whichever is later: every write to Redis of p's
//     counters since it began was this node's, from counters in memory, and every
//     earlier write was placed in buckets no later than that stamp, so outside the
//     window. (Counted from when it began alone, a writer whose clock was ahead of this
//     node's by more than freshMargin placed counts inside the window: simulation seed
//     40, a node 9.7 s ahead.)
//   - p's stamp, read in this generation, is older than the window (plus stampEvery and
//     freshMargin): every write to Redis of p before the read was placed no later (a
//     writer stamps a partition before it writes it, with at least the newest bucket it
//     writes, and again every stampEvery while it does), and every write since was this
//     node's. A partition Redis never got a write of (a new cluster, an emptied Redis)
//     has no stamp, so its loads stop at once.
//
// Both compare times of this node's clock with buckets and stamps placed by the writers'
// clocks, which is what the counter's window is made of, so neither needs the clocks to
// agree. Nor does a step of this node's clock fool them: the window is the clock as it
// is now (a counter already in memory acts at its newest bucket), and a step forward
// that makes a stamp look older makes its buckets leave the window as much. Since alone
// could be fooled: a step back between this node's writes of p in an earlier
// generation and since leaves those buckets after since; the stamp covers them too.
// departedAt is dated by the newest bucket of the writes it records, when that is later
// than the clock as they were confirmed. Still, nothing is skipped while this node does
// not know its clock to be within freshMargin of Redis's (clockAgrees): a clock that
// far off is a fault to mend, not one to build on.
func (o *Owner) knowsAllOf(p int, windowMs int64) bool {
	d := &o.parts.decided[p]
	g := o.parts.gen[p].Load() + 1
	if d.gen.Load() != g || !o.clockAgrees() {
		return false
	}
	now := o.cfg.Now()
	span := windowMs + freshMargin.Milliseconds()
	if now-d.departedAt.Load() <= span {
		return false // Redis holds, in the window, writes of p's counters memory lacks
	}
	if mutate.On(mutate.IgnoreClocks) && now-d.since.Load() > span {
		return true
	}
	if d.beforeGen.Load() == g && now-max(d.since.Load(), d.before.Load()+stampEvery.Milliseconds()) > span {
		return true
	}
	return d.quietGen.Load() == g && d.quietDeparted.Load() == d.departed.Load() &&
		now-d.quietAt.Load() > windowMs+(stampEvery+freshMargin).Milliseconds()
}

// skipsLoad reports whether op's counter, not in memory, is created without a load: its
// partition p says Redis holds nothing of it (knowsAllOf), and this node has no delta
// of it on its way there (left from a counter that left memory: then Redis is behind,
// and the load waits for it).
func (o *Owner) skipsLoad(p int, op *counter.Op) bool {
	return o.knowsAllOf(p, op.Window) && !o.flush.unsettledRef(op.Key, spec(op))
}

// readQuiet reads from Redis, once per partition and generation, the stamps of the
// partitions of misses not read yet, then calls then (skipsLoad then says which misses
// need no load). An error leaves them all to load.
func (o *Owner) readQuiet(rg *ring.Ring, misses []*miss, ops []counter.Op, then func()) {
	seen := lease.NewSet(rg.PartitionCount())
	var ps []int
	var gens, departed []uint64
	for _, m := range misses {
		p := rg.SlotPartition(ops[m.op].Slot)
		d := &o.parts.decided[p]
		if seen.Has(p) || d.quietGen.Load() == m.gen+1 && d.quietDeparted.Load() == d.departed.Load() {
			continue
		}
		seen.Add(p)
		ps, gens, departed = append(ps, p), append(gens, m.gen), append(departed, d.departed.Load())
	}
	if len(ps) == 0 {
		then()
		return
	}
	o.cfg.Redis.Written(rg.PartitionCount(), ps, func(at []int64, err error) {
		if err == nil {
			for i, p := range ps {
				d := &o.parts.decided[p]
				d.noteBefore(gens[i]+1, at[i])
				d.quietAt.Store(at[i])
				d.quietDeparted.Store(departed[i]) // (one confirmed meanwhile leaves it behind)
				d.quietGen.Store(gens[i] + 1)      // a generation since begun is never gens[i]+1
			}
		}
		then()
	})
}

// noteBefore records a stamp read in generation gen-1 (decidedSince.before).
func (d *decidedSince) noteBefore(gen uint64, at int64) {
	if d.beforeGen.Load() != gen {
		d.before.Store(at) // before beforeGen: who sees the generation sees this
		d.beforeGen.Store(gen)
		return
	}
	for {
		cur := d.before.Load()
		if at >= cur || d.before.CompareAndSwap(cur, at) {
			return
		}
	}
}

// noteDeparted records, of the deltas just confirmed in Redis, those of counters not in
// memory (skipsLoad must not trust a stamp read before them); newest is the start of the
// newest bucket among them (ms), when placed ahead of the counters' clock now (it
// stepped back since). The caller holds mu.
func (o *Owner) noteDeparted(refs []fallback.CounterRef, newest int64) {
	rg := o.ring.Load()
	if rg == nil {
		return
	}
	at := o.cfg.Now()
	if !mutate.On(mutate.IgnoreClocks) {
		at = max(at, newest)
	}
	for _, r := range refs {
		if !o.cfg.Store.Has(r.Key, r.Spec) {
			d := &o.parts.decided[rg.Partition(r.Key)]
			d.departedAt.Store(at) // before departed: who sees the count sees this
			d.departed.Add(1)
		}
	}
}

// stampEvery is how often a partition whose deltas this node keeps writing is stamped
// again: the stamps trail the writes by at most this. Redis that loses the stamps (an
// emptied or restarted Redis, one restored from an older snapshot) may get up to this
// much of a partition's deltas before it is stamped again, unless the write-behind saw
// Redis go away meanwhile (then everything is stamped again first): another node may then
// skip the load of those counters, a loss within what losing Redis's data loses anyway.
// This node loads its own (departedAt).
const stampEvery = time.Second

// stamp stamps, before their deltas are sent, the partitions of refs not stamped by
// this node within stampEvery; all of them on this node's first write, after Redis was
// unreachable, and when the stamps' epoch is not the one this node knows (Redis lost
// them); then it calls then with the outcome. The stamp is the counters' clock now, or
// newest (ms: the start of the newest bucket among the deltas) if that is later: a
// counter handed over from a node whose clock is ahead carries buckets this node's
// clock has not reached, and a stamp is never older than what it covers. The flush
// calls it, under Owner.mu, one at a time; then runs under Owner.mu too.
func (o *Owner) stamp(refs []fallback.CounterRef, newest int64, then func(error)) {
	rg := o.ring.Load()
	if rg == nil || len(refs) == 0 {
		then(nil) // no ring: nothing was decided, so no delta to send
		return
	}
	n, now, f := rg.PartitionCount(), o.cfg.Now(), &o.flush
	if !mutate.On(mutate.IgnoreClocks) {
		now = max(now, newest)
	}
	if f.epoch == "" || !o.cfg.Redis.Healthy() || o.cfg.Redis.Reopened() != f.reopened {
		o.forgetStamps() // (unhealthy: this call is the one that finds Redis back)
	}
	all, due := partitionsOf(rg, refs, func(p int) bool { return now-o.parts.stamped[p].Load() >= stampEvery.Milliseconds() })
	if len(due) == 0 {
		then(nil)
		return
	}
	candidate := strconv.FormatUint(o.recv.nextID.Add(1), 36)
	o.cfg.Redis.StampWritten(n, due, now, candidate, func(epoch string, err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if err == nil && f.epoch != "" && epoch != f.epoch {
			// The stamps were emptied since this node's last: Redis lost its data.
			// Write memory back in full (reseed.go), and stamp all again.
			o.reseed()
		}
		if err != nil || len(due) == len(all) || f.epoch != "" {
			o.stamped(epoch, due, now, err, then)
			return
		}
		o.cfg.Redis.StampWritten(n, all, now, candidate, func(again string, err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if err == nil && again != epoch {
				err = errors.New("the partition stamps were emptied twice in a row")
			}
			o.stamped(again, all, now, err, then)
		})
	})
}

// stamped records a stamp's outcome and calls then with it.
func (o *Owner) stamped(epoch string, ps []int, now int64, err error, then func(error)) {
	if err == nil {
		o.flush.epoch, o.flush.reopened = epoch, o.cfg.Redis.Reopened()
		for _, p := range ps {
			o.parts.stamped[p].Store(now)
		}
	}
	then(err)
}

// forgetStamps makes every partition due for a stamp.
func (o *Owner) forgetStamps() {
	for p := range o.parts.stamped {
		o.parts.stamped[p].Store(0)
	}
}

// partitionsOf returns the partitions of refs, each once, and those of them due says.
func partitionsOf(rg *ring.Ring, refs []fallback.CounterRef, due func(p int) bool) (all, dueOnes []int) {
	seen := lease.NewSet(rg.PartitionCount())
	for _, r := range refs {
		p := rg.Partition(r.Key)
		if seen.Has(p) {
			continue
		}
		seen.Add(p)
		all = append(all, p)
		if due(p) {
			dueOnes = append(dueOnes, p)
		}
	}
	return all, dueOnes
}
