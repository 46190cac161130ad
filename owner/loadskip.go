package owner

import (
	"errors"
	"strconv"
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

// noteDecided records that p is decided now, in its current generation (Record.Fresh).
// Called with decide held shared, so the generation cannot change meanwhile. It looks
// before it steps: it is on every op's path, and the note is made once a generation.
func (o *Owner) noteDecided(p int) {
	if r := o.parts.at(p); r.Fresh.DecidedGen != r.Gen+1 {
		o.step(p, Event{Kind: Decided, Ms: o.cfg.Now()})
	}
}

// redisHoldsNothing reports whether Redis can hold nothing in the window (windowMs) of a
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
func (o *Owner) redisHoldsNothing(p int, windowMs int64) bool {
	return o.clockAgrees() && o.parts.at(p).redisHoldsNothing(o.cfg.Now(), windowMs, mutate.On(mutate.IgnoreClocks))
}

// redisHoldsNothing is Owner.redisHoldsNothing for a partition with this record, at now (counters'
// clock, ms); ignoreClocks is the mutant that trusts since alone.
func (r *Record) redisHoldsNothing(now, windowMs int64, ignoreClocks bool) bool {
	f, g := &r.Fresh, r.Gen+1
	if f.DecidedGen != g {
		return false
	}
	span := windowMs + freshMargin.Milliseconds()
	if now-f.DepartedAt <= span {
		return false // Redis holds, in the window, writes of p's counters memory lacks
	}
	if ignoreClocks && now-f.DecidedSince > span {
		return true
	}
	if f.BeforeGen == g && now-max(f.DecidedSince, f.Before+stampEvery.Milliseconds()) > span {
		return true
	}
	return f.QuietGen == g && f.QuietDeparted == f.Departed &&
		now-f.QuietAt > windowMs+(stampEvery+freshMargin).Milliseconds()
}

// skipsLoad reports whether op's counter, not in memory, is created without a load: its
// partition p says Redis holds nothing of it (redisHoldsNothing), and this node has no delta
// of it on its way there (left from a counter that left memory: then Redis is behind,
// and the load waits for it).
func (o *Owner) skipsLoad(p int, op *counter.Op) bool {
	return o.redisHoldsNothing(p, op.Window) && !o.flush.unsettledRef(op.Key, spec(op))
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
		f := &o.parts.at(p).Fresh
		if seen.Has(p) || f.QuietGen == m.gen+1 && f.QuietDeparted == f.Departed {
			continue
		}
		seen.Add(p)
		ps, gens, departed = append(ps, p), append(gens, m.gen), append(departed, f.Departed)
	}
	if len(ps) == 0 {
		then()
		return
	}
	o.cfg.Redis.Written(rg.PartitionCount(), ps, func(at []int64, err error) {
		if err == nil {
			for i, p := range ps {
				// (A write confirmed meanwhile leaves Count behind Departed; a
				// generation since begun is never gens[i]+1.)
				o.step(p, Event{Kind: StampRead, Gen: gens[i], Ms: at[i], Count: departed[i]})
			}
		}
		then()
	})
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
			o.step(rg.Partition(r.Key), Event{Kind: Departed, Ms: at})
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
	all, due := partitionsOf(rg, refs, func(p int) bool {
		r := o.parts.at(p)
		return r.Fresh.StampedEra != f.era || now-r.Fresh.Stamped >= stampEvery.Milliseconds()
	})
	if len(due) == 0 {
		then(nil)
		return
	}
	st := &stamping{n: n, all: all, due: due, now: now, candidate: strconv.FormatUint(o.recv.nextID.Add(1), 36), then: then}
	o.ask(func() {
		o.cfg.Redis.StampWritten(n, due, now, st.candidate, func(epoch string, err error) {
			o.post(func() { o.stampedDue(st, epoch, err) })
		})
	})
}

// stamping is one stamp under way: of due, or of all the partitions of its deltas once
// the first found the stamps emptied.
type stamping struct {
	n         int // the partition count
	all, due  []int
	now       int64
	candidate string // the epoch proposed, should the stamps be empty
	then      func(error)
}

// stampedDue goes on after the stamps of st.due were written (or not): a first stamp
// that finds the stamps emptied stamps all of them, with the epoch it found. The caller
// holds mu.
func (o *Owner) stampedDue(st *stamping, epoch string, err error) {
	f := &o.flush
	if err == nil && f.epoch != "" && epoch != f.epoch {
		// The stamps were emptied since this node's last: Redis lost its data.
		// Write memory back in full (writeback.go), and stamp all again.
		o.writeBackInFull()
	}
	if err != nil || len(st.due) == len(st.all) || f.epoch != "" {
		o.stamped(epoch, st.due, st.now, err, st.then)
		return
	}
	o.ask(func() {
		o.cfg.Redis.StampWritten(st.n, st.all, st.now, st.candidate, func(again string, err error) {
			o.post(func() {
				if err == nil && again != epoch {
					err = errors.New("the partition stamps were emptied twice in a row")
				}
				o.stamped(again, st.all, st.now, err, st.then)
			})
		})
	})
}

// stamped records a stamp's outcome and calls then with it.
func (o *Owner) stamped(epoch string, ps []int, now int64, err error, then func(error)) {
	if err == nil {
		o.flush.epoch, o.flush.reopened = epoch, o.cfg.Redis.Reopened()
		for _, p := range ps {
			o.step(p, Event{Kind: Stamped, Gen: o.flush.era, Ms: now})
		}
	}
	then(err)
}

// forgetStamps makes every partition due for a stamp: a new era, which no Record's
// stamp was made in.
func (o *Owner) forgetStamps() { o.flush.era++ }

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
