package leaparray

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What a store with WithDeltas drains (and gives back on Evict) is exactly what was
// added and reset: replaying it (a reset, then a merge) into an empty store gives the
// same counts.
func TestDrainedDeltasRebuildTheStore(t *testing.T) {
	testDeltasRebuildTheStore(t, func(src *Store) []Delta { return src.Drain(nil) })
}

// Drained in parts (DrainSome), with adds and resets between the parts, the deltas
// still rebuild the store exactly, and no part holds more than its max counters with
// buckets.
func TestDrainedInPartsDeltasRebuildTheStore(t *testing.T) {
	var c DrainCursor
	max := 1
	testDeltasRebuildTheStore(t, func(src *Store) []Delta {
		ds, done := src.DrainSome(&c, nil, max)
		withBuckets := 0
		for _, d := range ds {
			if len(d.Buckets) > 0 {
				withBuckets++
			}
		}
		if withBuckets > max {
			t.Fatalf("a part of at most %d counters drained %d with buckets", max, withBuckets)
		}
		if done {
			c, max = DrainCursor{}, max%7+1
		}
		return ds
	})
}

func testDeltasRebuildTheStore(t *testing.T, drain func(*Store) []Delta) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("LEAPCOUNT_SEED"), 10, 64); err == nil {
		seed = v // replays a run
	}
	t.Logf("seed %d (LEAPCOUNT_SEED=%d replays it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 2))
	src, replica := NewStore(WithDeltas()), NewStore()
	now := int64(t0)
	apply := func(ds []Delta) {
		for _, d := range ds {
			if d.Reset {
				replica.Reset(d.Key, d.Spec, now)
			}
			replica.Merge(d.Key, d.Spec, d.Buckets)
		}
	}
	specs := []Spec{{1000, 10}, {60_000, 10}, {10, 2}}
	keys := map[string]bool{}
	for i := 0; i < 20000; i++ {
		now += r.Int64N(40)
		key, sp := fmt.Sprint("k", r.IntN(60)), specs[r.IntN(len(specs))]
		keys[key] = true
		switch p := r.IntN(100); {
		case p < 60:
			src.Incr(key, sp, randN(r), now)
		case p < 87:
			src.Allow(key, sp, r.Int64N(40), randN(r), now)
		case p < 89:
			src.Reset(key, sp, now)
		case p < 90: // state from elsewhere, which the replica has too: not pending
			if src.ResetPending(key, sp) {
				break // the reset would erase it from the replica: owners merge only with AddPending then (Merge)
			}
			bs := []Bucket{{Index: sp.Bucket(now), Count: uint64(randN(r))}}
			src.Merge(key, sp, bs)
			replica.Merge(key, sp, bs)
		case p < 91: // a handed-in counter's pending part: counted, and still to write
			bs := []Bucket{{Index: sp.Bucket(now), Count: uint64(randN(r))}}
			src.Merge(key, sp, bs)
			src.AddPending(key, sp, bs, false)
		case p < 92: // what expired goes, pending or not: it counts for nothing anywhere
			src.Sweep(now, 1+r.IntN(50))
		case p < 97:
			apply(drain(src))
		default:
			for _, ev := range src.Evict(func(k string) bool { return k == key }) {
				apply([]Delta{{Key: ev.Key, Spec: ev.Spec, Buckets: ev.Pending, Reset: ev.Reset}})
				// an evicted counter comes back from elsewhere, as a new owner's load would
				src.Seed(ev.Key, ev.Spec, replica.Snapshot(ev.Key, ev.Spec, now))
			}
		}
	}
	apply(src.Drain(nil))
	for key := range keys {
		for _, sp := range specs {
			if got, want := replica.Count(key, sp, now), src.Count(key, sp, now); got != want {
				t.Fatalf("%s %v (seed %d): replica counts %d; store %d", key, sp, seed, got, want)
			}
		}
	}
	if ds := src.Drain(nil); len(ds) != 0 {
		t.Fatalf("a second drain found %d deltas; want none", len(ds))
	}
}

func TestDeltasFollowWideningAndRemoval(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 2}
	const big = 1<<31 - 1
	s.Incr("wide", sp, big, t0) // one bucket: the one-bucket form
	for i := 0; i < 3; i++ {    // a second bucket: a narrow ring, which the third add overflows
		s.Incr("wide", sp, big, t0+500)
	}
	if got := tierOf(s, "wide", sp); got != wide {
		t.Fatalf("after overflowing a narrow bucket: got tier %d; want %d", got, wide)
	}
	s.Incr("gone", sp, 5, t0)
	s.Incr("stay", sp, 7, t0+600)
	if !s.Reset("gone", sp, t0) {
		t.Fatal("reset: want existed")
	}
	got := map[string]uint64{}
	for _, d := range s.Drain(nil) {
		if d.Reset != (d.Key == "gone") {
			t.Fatalf("%s drained with Reset %v; want %v", d.Key, d.Reset, !d.Reset)
		}
		got[d.Key] += 0
		for _, b := range d.Buckets {
			got[d.Key] += b.Count
		}
	}
	want := map[string]uint64{"wide": 4 * big, "stay": 7, "gone": 0}
	if len(got) != len(want) || got["wide"] != want["wide"] || got["stay"] != want["stay"] || got["gone"] != 0 {
		t.Fatalf("drained %v; want %v (a reset counter leaves nothing pending but its reset)", got, want)
	}
}

func TestEvictAndSeed(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	for i := 0; i < 100; i++ {
		s.Incr(fmt.Sprint("p1:", i), sp, 2, t0)
		s.Incr(fmt.Sprint("p2:", i), sp, 3, t0)
	}
	s.Drain(nil) // written behind: nothing pending
	s.Incr("p1:7", sp, 1, t0+100)
	evicted := s.Evict(func(k string) bool { return strings.HasPrefix(k, "p1:") })
	if len(evicted) != 100 || s.Len() != 100 {
		t.Fatalf("evicted %d, left %d; want 100 and 100", len(evicted), s.Len())
	}
	for _, ev := range evicted {
		wantPending := 0
		if ev.Key == "p1:7" {
			wantPending = 1
		}
		if len(ev.Pending) != wantPending {
			t.Fatalf("%s: pending %v; want %d bucket(s)", ev.Key, ev.Pending, wantPending)
		}
	}
	if s.Seed("p2:1", sp, []Bucket{{Index: t0 / 100, Count: 50}}) {
		t.Fatal("seed over a held counter: want false")
	}
	if !s.Seed("p1:7", sp, []Bucket{{Index: t0 / 100, Count: 2}, {Index: t0/100 + 1, Count: 1}}) {
		t.Fatal("seed of an absent counter: want true")
	}
	if got := s.Count("p1:7", sp, t0+150); got != 3 {
		t.Fatalf("seeded count: got %d; want 3", got)
	}
	if ds := s.Drain(nil); len(ds) != 0 {
		t.Fatalf("seeding left %d pending deltas; want none", len(ds))
	}
	if !s.Has("p2:1", sp) || s.Has("p1:1", sp) {
		t.Fatal("Has: want p2:1 held and p1:1 not")
	}
}

// ResetPending is true from a reset until the reset is drained or evicted, held counter
// or not, and only for that counter and shape; never without WithDeltas.
func TestResetPending(t *testing.T) {
	s := NewStore(WithDeltas())
	sp, other := Spec{WindowMs: 1000, Buckets: 10}, Spec{WindowMs: 1000, Buckets: 5}
	s.Incr("held", sp, 3, t0)
	s.Incr("held", other, 3, t0)
	for _, key := range []string{"held", "absent"} {
		if s.ResetPending(key, sp) {
			t.Fatalf("%s: ResetPending before any reset = true; want false", key)
		}
		s.Reset(key, sp, t0)
		s.Incr(key, sp, 1, t0+10) // added after the reset: still pending with it
		if !s.ResetPending(key, sp) {
			t.Fatalf("%s: ResetPending after Reset = false; want true", key)
		}
	}
	if s.ResetPending("held", other) || s.ResetPending("other", sp) {
		t.Fatal("ResetPending of another shape or key = true; want false")
	}
	s.Drain(nil)
	if s.ResetPending("held", sp) || s.ResetPending("absent", sp) {
		t.Fatal("ResetPending after Drain = true; want false")
	}
	s.Reset("gone", sp, t0)
	s.Evict(func(k string) bool { return k == "gone" })
	if s.ResetPending("gone", sp) {
		t.Fatal("ResetPending after Evict took the reset = true; want false")
	}
	plain := NewStore()
	plain.Incr("k", sp, 1, t0)
	plain.Reset("k", sp, t0)
	if plain.ResetPending("k", sp) {
		t.Fatal("ResetPending without WithDeltas = true; want false")
	}
}

// What a counter with a reset pending takes in from elsewhere is made pending too
// (Merge, then AddPending, as an owner installs a handed-in counter's pending part): the
// reset erases it where the deltas go, and the drained deltas still rebuild the counter.
func TestMergedAfterAPendingResetIsWrittenAfterIt(t *testing.T) {
	s, replica := NewStore(WithDeltas()), NewStore()
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	apply := func(ds []Delta) {
		for _, d := range ds {
			if d.Reset {
				replica.Reset(d.Key, d.Spec, t0)
			}
			replica.Merge(d.Key, d.Spec, d.Buckets)
		}
	}
	s.Incr("k", sp, 5, t0)
	apply(s.Drain(nil))
	s.Reset("k", sp, t0)
	in := []Bucket{{Index: sp.Bucket(t0), Count: 3}}
	s.Merge("k", sp, in)
	s.AddPending("k", sp, in, false)
	s.Incr("k", sp, 2, t0)
	apply(s.Drain(nil))
	if got, want := replica.Count("k", sp, t0), s.Count("k", sp, t0); got != want || want != 5 {
		t.Fatalf("replica counts %d, store %d; want 5 each (3 taken in after the reset, 2 added)", got, want)
	}
}

// HeldOrResetPending is Has or ResetPending, asked under one lock.
func TestHeldOrResetPending(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	s.Incr("held", sp, 1, t0)
	s.Reset("reset", sp, t0) // not held: a reset alone waits to be written
	check := func(when string, want map[string]bool) {
		t.Helper()
		for key, w := range want {
			got := s.HeldOrResetPending(key, sp)
			if got != w || got != (s.Has(key, sp) || s.ResetPending(key, sp)) {
				t.Fatalf("%s: HeldOrResetPending(%q) = %v; want %v (Has %v, ResetPending %v)",
					when, key, got, w, s.Has(key, sp), s.ResetPending(key, sp))
			}
		}
	}
	check("before a drain", map[string]bool{"held": true, "reset": true, "absent": false})
	s.Drain(nil)
	check("after a drain", map[string]bool{"held": true, "reset": false, "absent": false})
}

// Base is the counter without what is pending of it: what drained before, which Redis
// holds once those deltas are written.
func TestBaseIsWhatDrained(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	s.Incr("k", sp, 3, t0)
	s.Drain(nil)
	s.Incr("k", sp, 2, t0+200)
	base := s.Base("k", sp)
	if len(base) != 1 || base[0].Count != 3 {
		t.Fatalf("base %v; want the 3 drained", base)
	}
	if b := s.Base("other", sp); b != nil {
		t.Fatalf("base of a counter not held: %v", b)
	}
}

// A pass of DrainSome ends though its counters keep being added to between parts: it
// takes what was pending in a shard when it got there, and what came later waits for
// the next pass.
func TestDrainPassEndsUnderSteadyAdds(t *testing.T) {
	st := NewStore(WithDeltas())
	sp := Spec{1000, 10}
	now := int64(t0)
	for i := range 1000 {
		st.Incr(fmt.Sprint("k", i), sp, 1, now)
	}
	if n := st.PendingCounters(); n != 1000 {
		t.Fatalf("%d counters pending; want 1000", n)
	}
	var c DrainCursor
	drained := 0
	for parts := 0; ; parts++ {
		if parts > 2000 {
			t.Fatalf("the pass did not end after %d parts (%d deltas)", parts, drained)
		}
		ds, done := st.DrainSome(&c, nil, 3)
		drained += len(ds)
		for i := range 5 { // new counters, and more to ones drained already
			st.Incr(fmt.Sprint("n", parts, ".", i), sp, 1, now)
			st.Incr(fmt.Sprint("k", i), sp, 1, now)
		}
		if done {
			break
		}
	}
	if drained < 1000 {
		t.Fatalf("the pass drained %d deltas; want at least the 1000 pending when it began", drained)
	}
	st.Drain(nil)
	if n := st.PendingCounters(); n != 0 {
		t.Fatalf("%d counters pending after a whole drain; want 0", n)
	}
}

// A counter's pending buckets are kept one by one however many there are, the first in
// its entry and the others beside it, through partial drains that reuse those places.
func TestPendingKeepsEachBucket(t *testing.T) {
	st := NewStore(WithDeltas())
	sp := Spec{1000, 10}
	for round := range 3 {
		base := int64(t0)/sp.BucketMs() + int64(round)*20
		for i, key := range []string{"a", "b", "c"} {
			for k, j := range []int64{0, 0, 1, 2, 2, 3} {
				st.Incr(key, sp, int64(i+k+1), (base+j)*sp.BucketMs())
			}
		}
		want := func(i int) []Bucket {
			n := func(k int) uint64 { return uint64(i + k + 1) }
			return []Bucket{{base, n(0) + n(1)}, {base + 1, n(2)}, {base + 2, n(3) + n(4)}, {base + 3, n(5)}}
		}
		var c DrainCursor
		got := map[string][]Bucket{}
		for {
			ds, done := st.DrainSome(&c, nil, 1)
			for _, d := range ds {
				got[d.Key] = d.Buckets
			}
			if done {
				break
			}
		}
		for i, key := range []string{"a", "b", "c"} {
			if fmt.Sprint(got[key]) != fmt.Sprint(want(i)) {
				t.Fatalf("round %d: %s drained %v; want %v", round, key, got[key], want(i))
			}
		}
	}
}

// A pending entry keeps its first bucket in 32 bits: an index within 2048 of the slab's
// first pending add and a count below 2^19. A count that outgrows them, a bucket too far
// from that first add, and a bucket added again once the first moved to the others,
// still drain whole, each bucket once.
func TestPendingBeyondTheEntrysRange(t *testing.T) {
	st := NewStore(WithDeltas())
	sp := Spec{10, 2} // 5 ms buckets
	j := int64(t0) / sp.BucketMs()
	at := func(j int64) int64 { return j * sp.BucketMs() }
	st.Incr("a", sp, 3_000_000_000, at(j)) // past 32 bits at once
	st.Incr("a", sp, 3_000_000_000, at(j))
	st.Incr("a", sp, 5, at(j+1))
	st.Incr("c", sp, 500_000, at(j))
	st.Incr("c", sp, 600_000, at(j)) // past 19 bits: the first bucket moves to the others
	st.Incr("c", sp, 7, at(j))       // and it is added to there, not kept twice
	for k, off := range []int64{maxFirst, maxFirst + 1, minFirst, minFirst - 1, 1<<31 + 7} {
		key := fmt.Sprint("far", k)
		st.Incr(key, sp, 7, at(j+off))
		st.Incr(key, sp, 4_294_967_295, at(j+off+1))
		st.Incr(key, sp, 1, at(j+off+1))
	}
	got := map[string]string{}
	for _, d := range st.Drain(nil) {
		slices.SortFunc(d.Buckets, func(x, y Bucket) int { return cmp.Compare(x.Index, y.Index) })
		got[d.Key] = fmt.Sprint(d.Buckets)
	}
	want := map[string]string{
		"a": fmt.Sprint([]Bucket{{j, 6_000_000_000}, {j + 1, 5}}),
		"c": fmt.Sprint([]Bucket{{j, 1_100_007}}),
	}
	for k, off := range []int64{maxFirst, maxFirst + 1, minFirst, minFirst - 1, 1<<31 + 7} {
		want[fmt.Sprint("far", k)] = fmt.Sprint([]Bucket{{j + off, 7}, {j + off + 1, 4_294_967_296}})
	}
	if !maps.Equal(got, want) {
		t.Fatalf("drained %v; want %v", got, want)
	}
}
