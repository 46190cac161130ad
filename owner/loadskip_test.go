package owner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
)

// A counter not in memory, of a partition another node wrote to Redis, is loaded until
// this node has decided its partition for longer than its window (plus freshMargin),
// counted from the other node's stamp plus stampEvery (its writes may be that much
// newer); after that Redis can hold nothing of it in its window, and it is created
// without a load.
func TestNewCounterSkipsLoadOnceThePartitionIsKnown(t *testing.T) {
	_, st := startRedis(t)
	var n net
	n.redisClock = n.now // Redis's clock agrees with the counters': loads may be skipped
	a := n.sole(t, "a", st)
	if err := writeElsewhere(st, "{fresh}other", 1, t0); err != nil {
		t.Fatal(err)
	}
	do(a.Owner, incr("{fresh}0", 1))
	do(a.Owner, incr("{fresh}1", 1)) // the same slot, a moment later: loaded too
	if loaded, skipped := a.Loads(); loaded != 2 || skipped != 0 {
		t.Fatalf("within a window: loaded %d, skipped %d; want 2, 0", loaded, skipped)
	}
	n.clock.Store(t0 + sp.WindowMs + (stampEvery + freshMargin).Milliseconds())
	do(a.Owner, incr("{fresh}3", 1))
	if loaded, skipped := a.Loads(); loaded != 3 || skipped != 0 {
		t.Fatalf("a window after the stamp, within stampEvery: loaded %d, skipped %d; want 3, 0", loaded, skipped)
	}
	n.clock.Store(t0 + sp.WindowMs + (stampEvery + freshMargin).Milliseconds() + 1)
	if r := do(a.Owner, incr("{fresh}2", 2))[0]; r.Err != nil || r.Count != 2 {
		t.Fatalf("incr on a new counter: got %d, %v; want 2", r.Count, r.Err)
	}
	if loaded, skipped := a.Loads(); loaded != 3 || skipped != 1 {
		t.Fatalf("a window later: loaded %d, skipped %d; want 3, 1", loaded, skipped)
	}
	countIs(t, a.Owner, "{fresh}0", 0) // its bucket left the window
	do(a.Owner, incr("{fresh}0", 1))
	redisIs(t, st, "{fresh}2", 2)
}

// A node whose counters' clock is ahead of this one's places its counts in buckets this
// node's clock reaches only later: a partition it wrote just before this node began to
// decide it holds counts inside this node's window for longer than a window after that.
// Here the other clock is 8 s ahead (past freshMargin): its count, placed at its t0+8 s,
// is loaded a window plus freshMargin after this node began (seed 40 of the simulation
// lost such counts), and new counters are created without a load only once the other
// node's stamp is that old.
func TestSkipWaitsForAWriterWhoseClockIsAhead(t *testing.T) {
	_, st := startRedis(t)
	var n net
	n.redisClock = n.now // Redis's clock agrees with the counters': loads may be skipped
	a := n.sole(t, "a", st)
	const ahead = 8000
	if err := writeElsewhere(st, "{ahead}theirs", 5, t0+ahead); err != nil {
		t.Fatal(err)
	}
	do(a.Owner, incr("{ahead}mine", 1)) // a decides the partition from t0 on
	n.clock.Store(t0 + sp.WindowMs + freshMargin.Milliseconds() + 1)
	if r := do(a.Owner, count("{ahead}theirs"))[0]; r.Err != nil || r.Count != 5 {
		t.Fatalf("count of the other node's counter a window after a began: got %d, %v; want 5 (its bucket is in the window)", r.Count, r.Err)
	}
	n.clock.Store(t0 + ahead + sp.WindowMs + (stampEvery + freshMargin).Milliseconds() + 1)
	do(a.Owner, incr("{ahead}new", 1))
	if loaded, skipped := a.Loads(); loaded != 2 || skipped != 1 {
		t.Fatalf("a window after the other node's stamp: loaded %d, skipped %d; want 2, 1", loaded, skipped)
	}
}

// A stamp is never older than the buckets it covers: deltas placed by the counters'
// clock ahead of where it stands when they are written (it stepped back; a counter
// handed over from a node whose clock is ahead) are stamped with their newest bucket.
func TestStampCoversBucketsAheadOfTheClock(t *testing.T) {
	_, st := startRedis(t)
	var n net
	n.flush = time.Hour // flushed by hand
	a := n.sole(t, "a", st)
	k := "{stepped}k"
	n.clock.Store(t0 + 8000)
	do(a.Owner, incr(k, 1))
	n.clock.Store(t0) // stepped back 8 s before the write
	a.flushOnce(context.Background())
	rg := ringOf("a")
	got, err := st.Written(context.Background(), rg.PartitionCount(), []int{rg.Partition(k)})
	if want := sp.Bucket(t0+8000) * sp.BucketMs(); err != nil || got[0] < want {
		t.Fatalf("stamp %v, %v; want at least %d, the start of the bucket it covers", got, err, want)
	}
}

// No load is skipped while the counters' clock is not known to be within freshMargin
// of Redis's: not while Redis's is 8 s off, not while it cannot be read. A node that
// tried to read it for clockKnownFor says so (overdue).
func TestNoSkipUnlessTheClockAgreesWithRedis(t *testing.T) {
	_, st := startRedis(t)
	var n net
	n.redisClock = func() int64 { return n.now() - 8000 }
	a := n.sole(t, "a", st)
	e, known, overdue := a.RedisClock()
	if !known || overdue || e.Offset != -8*time.Second {
		t.Fatalf("Redis 8 s behind: estimate %+v, known %v, overdue %v; want -8s, known", e, known, overdue)
	}
	do(a.Owner, incr("{off}0", 1)) // never written: skipped were the clocks to agree
	if loaded, skipped := a.Loads(); loaded != 1 || skipped != 0 {
		t.Fatalf("clock 8 s off Redis's: loaded %d, skipped %d; want 1, 0", loaded, skipped)
	}

	var m net
	m.wrap = func(r Redis) Redis { return timeless{r} }
	b := m.sole(t, "b", st)
	do(b.Owner, incr("{off}1", 1))
	if loaded, skipped := b.Loads(); loaded != 1 || skipped != 0 {
		t.Fatalf("Redis's clock unread: loaded %d, skipped %d; want 1, 0", loaded, skipped)
	}
	now := b.cfg.Clock.Since()
	if _, known, overdue := b.redisClockAt(now); known || overdue {
		t.Fatalf("just started, clock unread: known %v, overdue %v; want neither", known, overdue)
	}
	if _, known, overdue := b.redisClockAt(now + clockKnownFor + time.Second); known || !overdue {
		t.Fatalf("clock unread for %v: known %v, overdue %v; want overdue", clockKnownFor, known, overdue)
	}
	if _, known, _ := a.redisClockAt(a.cfg.Clock.Since() + clockKnownFor + clockEvery + time.Second); known {
		t.Fatal("an estimate older than clockKnownFor is still known")
	}
}

// timeless is a Redis whose TIME fails.
type timeless struct{ Redis }

func (timeless) Time(done func(int64, error)) {
	go done(0, errors.New("TIME refused"))
}

// A partition Redis never got a write of (a new cluster, an emptied Redis) has no
// stamp: its new counters are created without a load at once. One written longer ago
// than a window (plus stampEvery and freshMargin) is the same; one written within it is
// loaded, and so is each of its new counters.
func TestNewCounterSkipsLoadByThePartitionStamp(t *testing.T) {
	_, st := startRedis(t)
	var n net
	n.redisClock = n.now // Redis's clock agrees with the counters': loads may be skipped
	a := n.sole(t, "a", st)
	do(a.Owner, incr("{never}0", 1), incr("{never}1", 2))
	if loaded, skipped := a.Loads(); loaded != 0 || skipped != 2 {
		t.Fatalf("never written: loaded %d, skipped %d; want 0, 2", loaded, skipped)
	}
	stampedAt := t0 - sp.WindowMs - (stampEvery + freshMargin).Milliseconds() - 1
	if err := writeElsewhere(st, "{old}x", 3, stampedAt); err != nil {
		t.Fatal(err)
	}
	if err := writeElsewhere(st, "{recent}x", 4, t0-1000); err != nil {
		t.Fatal(err)
	}
	do(a.Owner, incr("{old}y", 1), incr("{recent}y", 1))
	if loaded, skipped := a.Loads(); loaded != 1 || skipped != 3 {
		t.Fatalf("written long ago and just now: loaded %d, skipped %d; want 1, 3", loaded, skipped)
	}
	countIs(t, a.Owner, "{recent}x", 4) // loaded: its partition was written within a window
	countIs(t, a.Owner, "{old}x", 0)    // created without a load: nothing left in its window
	redisIs(t, st, "{never}1", 2)
	if loaded, skipped := a.Loads(); loaded != 2 || skipped != 4 {
		t.Fatalf("at the end: loaded %d, skipped %d; want 2, 4", loaded, skipped)
	}
}

// After a lapse another node may have decided the partition and written its counters
// to Redis: new counters are loaded again, however long this node held it before.
func TestLapseEndsTheLoadSkip(t *testing.T) {
	_, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	one := ringOf("a")
	k := "{lapse}new"
	p := one.Partition(k)
	do(a.Owner, incr("{lapse}old", 1))
	now := t0 + sp.WindowMs + freshMargin.Milliseconds() + 1
	n.clock.Store(now)
	a.lapse(p)
	regrantAfterOthersCounted(t, a, st, k, now, 0)
}

// BenchmarkNewCounters decides increments of new counters, 16 per batch, on an owner
// without Redis, with Redis loading each, and with Redis once the owner has held
// their partitions for longer than their window (no load: redisHoldsNothing). Compare ns/op
// within one run. Each run starts from an empty Redis: the stamp an earlier run's owner
// left of the partition would make this one load (it may have written counters).
func BenchmarkNewCounters(b *testing.B) {
	srv, st := startRedis(b)
	rc := srv.Client(b)
	for _, mode := range []string{"no-redis", "redis-load", "redis-known"} {
		b.Run(mode, func(b *testing.B) {
			if err := rc.FlushAll(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			var n net
			n.flush = time.Hour // write-behind out of the way: the ops alone
			var redis *fallback.Store
			if mode != "no-redis" {
				redis = st
			}
			o := n.sole(b, "a", redis)
			prefix := fmt.Sprintf("{%s}", mode) // one slot: the partition noted by the first op
			do(o.Owner, incr(prefix+"first", 1))
			if mode == "redis-known" {
				n.clock.Store(t0 + sp.WindowMs + freshMargin.Milliseconds() + 1)
			}
			ops := make([]counter.Op, 16)
			res := make([]counter.Result, 16)
			b.ResetTimer()
			for i := 0; i < b.N; i += len(ops) {
				for j := range ops {
					ops[j] = incr(fmt.Sprintf("%s%d", prefix, i+j), 1)
				}
				counter.Do(context.Background(), o, ops, res)
			}
			b.StopTimer()
			if loaded, _ := o.Loads(); mode == "redis-known" && loaded != 0 {
				b.Fatalf("%d counters loaded: the benchmark no longer measures the load skip", loaded)
			}
		})
	}
}

// A counter whose write this node confirmed after it left memory is loaded, even when
// its partition's stamp says Redis never got a write of it: Redis restarted empty
// between the stamp and the write, and the write landed all the same (sim seed 660:
// 12 acknowledged increments skipped, the counter created again at 0).
func TestDepartedWriteIsLoadedWhateverTheStamp(t *testing.T) {
	_, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	k := "{departed}k"
	if err := fallbacktest.Add(context.Background(), st, k, sp, 12, t0); err != nil { // no stamp: it was lost
		t.Fatal(err)
	}
	a.lock()
	a.noteDeparted([]fallback.CounterRef{{Key: k, Spec: sp}}, 0)
	a.unlock()
	if r := do(a.Owner, incr(k, 1))[0]; r.Err != nil || r.Count != 13 {
		t.Fatalf("incr after a departed write Redis holds: got %d, %v; want 13", r.Count, r.Err)
	}
	if loaded, skipped := a.Loads(); loaded != 1 || skipped != 0 {
		t.Fatalf("loaded %d, skipped %d; want 1, 0", loaded, skipped)
	}
}

// A write of this node's confirmed after its counter left memory, of buckets its clock
// placed before stepping back, keeps the load for a window after its newest bucket, not
// after the (stepped back) time it was confirmed.
func TestDepartedWriteAheadOfTheClockIsLoaded(t *testing.T) {
	_, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	k := "{departed-ahead}k"
	placed := int64(t0 + 8000) // its clock then; it stepped back to t0 before the write was confirmed
	if err := fallbacktest.Add(context.Background(), st, k, sp, 12, placed); err != nil {
		t.Fatal(err)
	}
	a.lock()
	a.noteDeparted([]fallback.CounterRef{{Key: k, Spec: sp}}, sp.Bucket(placed)*sp.BucketMs())
	a.unlock()
	n.clock.Store(t0 + sp.WindowMs + freshMargin.Milliseconds() + 1) // a window after t0, not after the bucket
	if r := do(a.Owner, incr(k, 1))[0]; r.Err != nil || r.Count != 13 {
		t.Fatalf("incr after a departed write placed ahead: got %d, %v; want 13", r.Count, r.Err)
	}
}
