package owner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
)

// A counter not in memory, of a partition another node wrote to Redis, is loaded until
// this node has decided its partition for longer than its window (plus freshMargin);
// after that Redis can hold nothing of it in its window, and it is created without a
// load.
func TestNewCounterSkipsLoadOnceThePartitionIsKnown(t *testing.T) {
	_, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	if err := writeElsewhere(st, "{fresh}other", 1, t0); err != nil {
		t.Fatal(err)
	}
	do(a.Owner, incr("{fresh}0", 1))
	do(a.Owner, incr("{fresh}1", 1)) // the same slot, a moment later: loaded too
	if loaded, skipped := a.Loads(); loaded != 2 || skipped != 0 {
		t.Fatalf("within a window: loaded %d, skipped %d; want 2, 0", loaded, skipped)
	}
	n.clock.Store(t0 + sp.WindowMs + freshMargin.Milliseconds() + 1)
	if r := do(a.Owner, incr("{fresh}2", 2))[0]; r.Err != nil || r.Count != 2 {
		t.Fatalf("incr on a new counter: got %d, %v; want 2", r.Count, r.Err)
	}
	if loaded, skipped := a.Loads(); loaded != 2 || skipped != 1 {
		t.Fatalf("a window later: loaded %d, skipped %d; want 2, 1", loaded, skipped)
	}
	countIs(t, a.Owner, "{fresh}0", 0) // its bucket left the window
	do(a.Owner, incr("{fresh}0", 1))
	redisIs(t, st, "{fresh}2", 2)
}

// A partition Redis never got a write of (a new cluster, an emptied Redis) has no
// stamp: its new counters are created without a load at once. One written longer ago
// than a window (plus stampEvery and freshMargin) is the same; one written within it is
// loaded, and so is each of its new counters.
func TestNewCounterSkipsLoadByThePartitionStamp(t *testing.T) {
	_, st := startRedis(t)
	var n net
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
// their partitions for longer than their window (no load: knowsAllOf). Compare ns/op
// within one run.
func BenchmarkNewCounters(b *testing.B) {
	_, st := startRedis(b)
	for _, mode := range []string{"no-redis", "redis-load", "redis-known"} {
		b.Run(mode, func(b *testing.B) {
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
	if _, err := st.Incr(context.Background(), k, sp, 12, t0); err != nil { // no stamp: it was lost
		t.Fatal(err)
	}
	a.mu.Lock()
	a.noteDeparted([]fallback.CounterRef{{Key: k, Spec: sp}})
	a.mu.Unlock()
	if r := do(a.Owner, incr(k, 1))[0]; r.Err != nil || r.Count != 13 {
		t.Fatalf("incr after a departed write Redis holds: got %d, %v; want 13", r.Count, r.Err)
	}
	if loaded, skipped := a.Loads(); loaded != 1 || skipped != 0 {
		t.Fatalf("loaded %d, skipped %d; want 1, 0", loaded, skipped)
	}
}
