package owner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
)

// A partition due a write-back in full (Redis lost its data since its counters came
// here) that goes stale keeps its memory instead of reloading it: the emptied Redis
// lacks what only memory holds (sim seed 696 lost 114 of 146 increments).
func TestStalePartitionDueAWriteBackKeepsItsMemory(t *testing.T) {
	_, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	rg := ringOf("a")
	k := keysOf(rg, "a", 1)[0]
	do(a.Owner, incr(k, 5))
	a.flushOnce(context.Background())
	if err := writeElsewhere(st, k, 100, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	p := rg.Partition(k)
	a.lock()
	a.step(p, on(RedisLost))
	s := lease.NewSet(a.parts.count())
	s.Add(p)
	if a.markStale(s, LateWrite) != 1 {
		a.unlock()
		t.Fatal("the partition did not go stale")
	}
	a.cleanDrop(rg, []int{p}, []bool{false})
	a.unlock()
	mustCount(t, a.Owner, k, 5)
}

// A partition whose lease lapses after Redis lost its data, before this node saw the
// loss, drops its stale memory and reloads once granted again, rather than keeping it
// to write it back in full as the test above does: another node may have decided it
// meanwhile on the emptied Redis, and a write-back in full would erase what that node
// wrote (sim seed 33498: an allow counter lost 15 admissions made after the loss). What
// memory alone held (here the 5) is lost, as the faults table of docs/guarantees.md allows for an owner
// whose lease lapses before its write-back.
func TestStaleMemoryIsNotWrittenBackOverWritesToTheEmptiedRedis(t *testing.T) {
	srv, st := startRedis(t)
	n := net{flush: time.Hour} // each writes when the test says
	a := n.sole(t, "a", st)
	rg := ringOf("a")
	k := keysOf(rg, "a", 1)[0]
	p := rg.Partition(k)
	do(a.Owner, incr(k, 5))
	a.flushOnce(context.Background())
	redisIs(t, st, k, 5)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	a.lapse(p)
	if err := writeElsewhere(st, k, 7, n.now()); err != nil { // the next owner's, meanwhile
		t.Fatal(err)
	}
	eventually(t, "a finds the loss and drops or keeps its stale memory", func() error {
		a.Tick()
		if a.RedisLosses() == 0 || a.PartitionState(p) != Owned {
			return fmt.Errorf("Redis losses %d, partition %v", a.RedisLosses(), a.PartitionState(p))
		}
		return nil
	})
	a.leases.grant(true, p)
	a.Tick()
	a.flushOnce(context.Background())
	mustCount(t, a.Owner, k, 7)
	a.flushOnce(context.Background())
	redisIs(t, st, k, 7)
}

// A counter handed over for a partition this node decided before it came, and whose
// writes of it that left memory Redis holds (it decided the counter blind while the
// sender was cut off, then dropped it to reload), is not seeded from the sender's
// memory, which lacks them: its pending part is written and the rest loads from Redis
// (sim seed 3294: one increment lost).
func TestHandedCounterLacksThisNodesDepartedWrites(t *testing.T) {
	_, st := startRedis(t)
	var n net
	b := n.sole(t, "b", st)
	rg := ringOf("b")
	k := keysOf(rg, "b", 1)[0]
	now := n.now()
	if err := writeElsewhere(st, k, 12, now); err != nil { // the sender's confirmed base
		t.Fatal(err)
	}
	if err := writeElsewhere(st, k, 1, now); err != nil { // b's own, from a counter that left its memory
		t.Fatal(err)
	}
	b.step(rg.Partition(k), on(Departed)) // (dated 0: outside every window)
	idx := sp.Bucket(now)
	h := &Handoff{From: "a", ID: 1, Counters: []HandoffCounter{{Key: k, Spec: sp,
		Buckets: []leaparray.Bucket{{Index: idx, Count: 25}}, Pending: []leaparray.Bucket{{Index: idx, Count: 13}}}}}
	if err := b.Handoff(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	b.flushOnce(context.Background())
	mustCount(t, b.Owner, k, 26)
}

// Redis lost its data while a release goes through it: the counters on their way out
// are written back in full, but not one started blind (decided from empty memory while
// Redis was unreachable for this node): its memory lacks what Redis holds, and written
// as a whole state it would erase what others wrote there since (sim seed 7330 lost 79
// of 149 increments).
func TestRedisLossWritesBackNoBlindCounterOfARelease(t *testing.T) {
	_, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	rg := ringOf("a")
	ks := keysOf(rg, "a", 2)
	blind, whole := ks[0], ks[1]
	idx := sp.Bucket(n.now())
	three := []leaparray.Bucket{{Index: idx, Count: 3}}
	pb := rg.Partition(blind)
	rel := &release{parts: []int{pb, rg.Partition(whole)}, persist: true,
		ev:      []leaparray.Evicted{{Key: blind, Spec: sp, Buckets: three}, {Key: whole, Spec: sp, Buckets: three}},
		partial: partialMemory{blind: map[int]*blindSet{pb: {keys: map[string]struct{}{blind: {}}}}}}
	a.lock()
	a.releases.jobs = append(a.releases.jobs, rel)
	a.writeBackInFull()
	a.releases.jobs = a.releases.jobs[:len(a.releases.jobs)-1]
	a.flush.mu.Lock()
	bases := map[string]bool{}
	for _, d := range a.flush.queue {
		if d.Base {
			bases[d.Key] = true
		}
	}
	a.flush.mu.Unlock()
	a.unlock()
	if bases[blind] || !bases[whole] {
		t.Fatalf("written back in full: blind counter %v, whole counter %v; want false, true", bases[blind], bases[whole])
	}
}

// The same while this node's write of the counter that left its memory is not yet
// confirmed (still queued, or in doubt): the sender's counts lack it too (sim seed 8420
// lost 3).
func TestHandedCounterLacksThisNodesUnconfirmedWrite(t *testing.T) {
	_, st := startRedis(t)
	var n net
	b := n.sole(t, "b", st)
	rg := ringOf("b")
	k := keysOf(rg, "b", 1)[0]
	now := n.now()
	if err := writeElsewhere(st, k, 12, now); err != nil { // the sender's confirmed base
		t.Fatal(err)
	}
	idx := sp.Bucket(now)
	h := &Handoff{From: "a", ID: 1, Counters: []HandoffCounter{{Key: k, Spec: sp,
		Buckets: []leaparray.Bucket{{Index: idx, Count: 25}}, Pending: []leaparray.Bucket{{Index: idx, Count: 13}}}}}
	b.lock()
	b.flush.enqueue([]fallback.Delta{{Key: k, Spec: sp, Buckets: []leaparray.Bucket{{Index: idx, Count: 3}}}})
	err := b.takeIn(h)
	b.unlock()
	if err != nil {
		t.Fatal(err)
	}
	b.flushOnce(context.Background())
	mustCount(t, b.Owner, k, 28)
}

// A reset decided before its partition's lease lapsed, in a batch Redis never got (its
// stamps failed), keeps the lapse's mark when the batch gives its deltas back (a
// release takes the unsent ones out): it goes without its reset, as it would have from
// the batch, and erases nothing another node counted since (sim seed 8534: a reset
// written after a pause erased what the next owner had counted).
func TestUnsentResetKeepsItsLapse(t *testing.T) {
	srv, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	rg := ringOf("a")
	k := keysOf(rg, "a", 1)[0]
	do(a.Owner, incr(k, 2))
	a.flushOnce(context.Background())
	stopRedis(t, srv, st, a.Owner)
	do(a.Owner, reset(k), incr(k, 1))
	a.flushOnce(context.Background()) // drains a batch with the reset; its stamps fail
	a.lapse(rg.Partition(k))
	a.lock()
	a.takeUnsent(nil)
	a.flush.mu.Lock()
	var resets int
	for _, d := range a.flush.queue {
		if d.Key == k && d.Reset {
			resets++
		}
	}
	a.flush.mu.Unlock()
	a.unlock()
	if resets != 0 {
		t.Fatalf("the reset decided before the lapse is back in the queue as a reset (%d)", resets)
	}
}

// A Handoff taken in while a load of one of its counters is under way voids that load:
// the load read Redis before the Handoff's pending part (and the writes its fences
// stand for) could be there. Installed, it would make memory miss them for good (sim
// seed 906: a load of 0 installed over a handed counter whose 16 pending went to Redis
// only, and the counter answered 1 where 17 were admitted).
func TestHandoffDuringALoadVoidsTheLoad(t *testing.T) {
	_, st := startRedis(t)
	var n net
	b := n.sole(t, "b", st)
	rg := ringOf("b")
	k := keysOf(rg, "b", 1)[0]
	p := rg.Partition(k)
	ops := []counter.Op{incr(k, 1)}
	if err := b.cfg.Limits.Check(&ops[0]); err != nil { // as Decide does
		t.Fatal(err)
	}
	r := &request{ctx: context.Background(), ops: ops, results: make([]counter.Result, 1)}
	b.decide.RLock()
	l, _ := b.listMisses(rg, r, b.cfg.Clock.Since())
	b.decide.RUnlock()
	if l == nil || len(l.misses) != 1 {
		t.Fatalf("listed misses %+v; want the one of %q", l, k)
	}
	l.misses[0].buckets = []leaparray.Bucket{} // what the load read: nothing yet
	// b decided p since it gained it and a write of it left memory: the handed counter
	// arrives without its buckets, its pending part to be written and loaded back.
	b.step(p, on(Departed)) // (dated 0: outside every window)
	idx := sp.Bucket(n.now())
	h := &Handoff{From: "a", ID: 1, Counters: []HandoffCounter{{Key: k, Spec: sp,
		Buckets: []leaparray.Bucket{{Index: idx, Count: 16}}, Pending: []leaparray.Bucket{{Index: idx, Count: 16}}}}}
	b.lock()
	err := b.takeIn(h)
	b.unlock()
	if err != nil {
		t.Fatal(err)
	}
	if failed := b.install(l); failed[0] == nil {
		t.Fatalf("the load begun before the Handoff was installed (memory holds %q: %v)", k, b.cfg.Store.Has(k, sp))
	}
	b.flushOnce(context.Background())
	mustCount(t, b.Owner, k, 16)
}

// A counter handed on is loaded from Redis, not taken as it arrived, when Redis answers
// at the sender's epoch: the sender's counts are only as new as its last decision, and
// this node may have written newer ones since in an earlier turn as owner (sim seed
// 3390: a Handoff of 58, sent when Redis was down and delivered much later, was taken
// over the 64 this node had written before it dropped its memory).
func TestHandedCounterOlderThanRedisLoadsFromRedis(t *testing.T) {
	_, st := startRedis(t)
	var n net
	b := n.sole(t, "b", st)
	rg := ringOf("b")
	k := keysOf(rg, "b", 1)[0]
	do(b.Owner, incr(k, 64))
	b.flushOnce(context.Background())
	b.cfg.Store.Evict(func(key string) bool { return key == k }) // its memory dropped (stale)
	b.lock()
	epoch := b.flush.epoch
	b.unlock()
	if epoch == "" {
		t.Fatal("b knows no epoch after a flush: the test needs one")
	}
	idx := sp.Bucket(n.now())
	h := &Handoff{From: "a", ID: 1, RedisEpoch: epoch, Counters: []HandoffCounter{{Key: k, Spec: sp,
		Buckets: []leaparray.Bucket{{Index: idx, Count: 58}}}}}
	b.lock()
	err := b.takeIn(h)
	b.unlock()
	if err != nil {
		t.Fatal(err)
	}
	mustCount(t, b.Owner, k, 64)
}

// Counters of a release the ring undid come back into memory as they left, a write of
// theirs in doubt or not: that write is this node's own, and memory has it. Before,
// they came back as from another node, their pending part alone; with Redis down the
// node then decided them from empty memory (sim seed 306: an incr answered 1 where 6
// were acknowledged, and the count stayed short after Redis lost its data).
func TestReleaseUndoneKeepsCountersWithAWriteInDoubt(t *testing.T) {
	srv, st := startRedisQuick(t)
	var n net
	a, _ := n.sole(t, "a", st), n.add(t, "b", st)
	one, two := ringOf("a"), ringOf("a", "b")
	k := keysOf(two, "b", 1)[0]
	do(a.Owner, incr(k, 5))
	redisIs(t, st, k, 5)
	srv.Pause()
	do(a.Owner, incr(k, 1))
	a.flushOnce(context.Background()) // it goes out, and no answer comes
	if !a.flush.unsettledRef(k, sp) {
		t.Fatalf("the write of %q is not in doubt", k)
	}
	breakerOpen(t, st, a.Owner)
	n.fail = func(string, *Handoff) (drop, lose bool) { return true, false } // b is out of reach
	a.SetRing(two)
	eventually(t, "a's release goes node to node", func() error {
		a.lock()
		defer a.unlock()
		for _, rel := range a.releases.jobs {
			if !rel.persist {
				return nil
			}
		}
		return errors.New("still through Redis")
	})
	a.SetRing(one)
	if err := a.WaitReleased(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustCount(t, a.Owner, k, 6)
}

// A release the ring undoes while its deltas are on their way to Redis ends at once:
// its counters go back into memory as they left, and are decided here again. Before,
// with Redis down, the partition was not decided for persistWait (ops failed not-owned
// meanwhile), and its counters then came back as their pending part alone.
func TestReleaseUndoneWhileOnItsWayToRedisEndsAtOnce(t *testing.T) {
	srv, st := startRedisQuick(t)
	var n net
	a, _ := n.sole(t, "a", st), n.add(t, "b", st)
	one, two := ringOf("a"), ringOf("a", "b")
	k := keysOf(two, "b", 1)[0]
	do(a.Owner, incr(k, 5))
	redisIs(t, st, k, 5)
	pauseRedis(t, srv, st, a.Owner)
	do(a.Owner, incr(k, 1))
	a.SetRing(two)
	a.SetRing(one)
	if st := a.PartitionState(one.Partition(k)); st != Owned {
		t.Fatalf("a's partition of %q is %v once the ring gave it back; want owned", k, st)
	}
	mustCount(t, a.Owner, k, 6)
	srv.Resume()
	eventually(t, "Redis has k's last increment", func() error {
		got, err := fallbacktest.Count(context.Background(), st, k, sp, t0)
		if err == nil && got != 6 {
			err = fmt.Errorf("Redis has %d", got)
		}
		return err
	})
}

// A counter handed in with a reset, to a node that counted it blind meanwhile (Redis
// down, the sender cut off before its reset reached Redis), keeps what this node
// counted: the reset came before it. Before, the reset went to Redis after this node's
// deltas, already in a batch, and erased them (sim seed 5934: 2 short).
func TestHandedResetErasesNothingCountedBlindSince(t *testing.T) {
	srv, st := startRedisQuick(t)
	var n net
	a := n.sole(t, "a", st)
	k := keysOf(ringOf("a"), "a", 1)[0]
	do(a.Owner, incr(k, 4))
	redisIs(t, st, k, 4)
	a.lock()
	a.cfg.Store.Evict(func(key string) bool { return key == k }) // (memory of it gone: as on another node)
	a.unlock()
	pauseRedis(t, srv, st, a.Owner)
	do(a.Owner, incr(k, 2)) // blind
	a.flushOnce(context.Background())
	if !a.flush.unsettledRef(k, sp) {
		t.Fatalf("a's deltas of %q are not on their way", k)
	}
	idx := sp.Bucket(n.now())
	h := &Handoff{From: "b", ID: 1, Counters: []HandoffCounter{{Key: k, Spec: sp, Reset: true,
		Buckets: []leaparray.Bucket{{Index: idx, Count: 1}}, Pending: []leaparray.Bucket{{Index: idx, Count: 1}}}}}
	a.lock()
	err := a.takeIn(h)
	a.unlock()
	if err != nil {
		t.Fatal(err)
	}
	srv.Resume()
	eventually(t, "Redis has the reset and what came after it", func() error {
		a.flushOnce(context.Background())
		a.lock()
		unwritten := !a.flush.empty()
		a.unlock()
		got, err := fallbacktest.Count(context.Background(), st, k, sp, t0)
		if err == nil && (got != 3 || unwritten) {
			err = fmt.Errorf("Redis has %d (deltas still to write: %v)", got, unwritten)
		}
		return err
	})
}
