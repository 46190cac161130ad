package leaparray

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkSums fails t unless every ring's running sum is the sum of its buckets.
func checkSums(t *testing.T, s *Store, where string) {
	t.Helper()
	s.eachShard(func(_ *table, sh *shard) {
		if bad := badSum(&sh.narrow); bad != "" {
			t.Fatalf("%s: narrow ring of %s", where, bad)
		}
		if bad := badSum(&sh.wide); bad != "" {
			t.Fatalf("%s: wide ring of %s", where, bad)
		}
	})
}

func badSum[C count](s *slab[C]) string {
	for i := range s.refs.s {
		hd, counts := s.ring(i)
		var sum uint64
		for _, c := range counts {
			sum += uint64(c)
		}
		if sum != hd.sum {
			return fmt.Sprintf("%q: sum %d; buckets add up to %d", s.key(i), hd.sum, sum)
		}
	}
	return ""
}

// pendingAt is what bucket j of the counter has pending.
func pendingAt(s *Store, key string, sp Spec, j int64) uint64 {
	bs, _ := s.Pending(key, sp)
	var n uint64
	for _, b := range bs {
		if b.Index == j {
			n += b.Count
		}
	}
	return n
}

// Take gives back part of a bucket in every form a counter can be in: the one-bucket
// form (its head bucket), and narrow and wide rings (any bucket still in the window).
// It stops at zero, and the count afterwards is what the other buckets hold.
func TestTakeInEveryForm(t *testing.T) {
	sp := Spec{WindowMs: 1000, Buckets: 10} // buckets of 100 ms
	j0 := sp.Bucket(t0)
	for _, c := range []struct {
		name  string
		first int64 // added at t0, into bucket j0
		other int64 // added at t0+300 (none: 0)
		tier  tier
	}{
		{"one", 10, 0, one},
		{"narrow", 10, 5, narrow},
		{"wide", 1<<33 + 10, 5, wide}, // a bucket past 32 bits
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewStore()
			s.Incr("k", sp, c.first, t0)
			if c.other > 0 {
				s.Incr("k", sp, c.other, t0+300)
			}
			if got := tierOf(s, "k", sp); got != c.tier {
				t.Fatalf("tier %d; want %d", got, c.tier)
			}
			now := int64(t0 + 500)
			if got := s.Take("k", sp, j0, 4, now); got != 4 {
				t.Fatalf("take 4 of bucket j0: took %d", got)
			}
			if got, want := s.Count("k", sp, now), c.first-4+c.other; got != want {
				t.Fatalf("count after taking 4: %d; want %d", got, want)
			}
			if got, want := s.Take("k", sp, j0, 1<<62, now), c.first-4; got != want {
				t.Fatalf("take more than the bucket holds: took %d; want %d", got, want)
			}
			if got := s.Count("k", sp, now); got != c.other {
				t.Fatalf("count after emptying bucket j0: %d; want the other buckets' %d", got, c.other)
			}
			if got := s.Take("k", sp, j0, 1, now); got != 0 {
				t.Fatalf("take off an empty bucket: took %d", got)
			}
			if got := s.Take("k", sp, j0+7, 1, now); got != 0 { // past the head: holds nothing
				t.Fatalf("take off a bucket past the head: took %d", got)
			}
			if got := tierOf(s, "k", sp); got != c.tier {
				t.Fatalf("tier after taking %d; want %d", got, c.tier)
			}
			checkSums(t, s, c.name)
			s.Incr("k", sp, 2, now) // the counter goes on counting
			if got := s.Count("k", sp, now); got != c.other+2 {
				t.Fatalf("count after adding again: %d; want %d", got, c.other+2)
			}
		})
	}
}

// A bucket takes nothing once it has left the window at now, though the ring still
// holds it: a clock that steps back still counts it whole.
func TestTakeAfterTheBucketLeft(t *testing.T) {
	sp := Spec{WindowMs: 1000, Buckets: 10}
	j0 := sp.Bucket(t0)
	s := NewStore()
	s.Incr("one", sp, 10, t0)
	s.Incr("ring", sp, 10, t0)
	s.Incr("ring", sp, 1, t0+900)
	for _, c := range []struct {
		key    string
		now    int64 // when j0 has just left the window
		behind int64 // a time at or behind the head, where j0 counts
		want   int64
	}{{"one", t0 + 1000, t0, 10}, {"ring", t0 + 1000, t0 + 950, 11}} {
		if got := s.Take(c.key, sp, j0, 5, c.now); got != 0 {
			t.Fatalf("%s: take off a bucket that left the window: took %d", c.key, got)
		}
		if got := s.Count(c.key, sp, c.behind); got != c.want {
			t.Fatalf("%s: count at the head: %d; want %d, untouched", c.key, got, c.want)
		}
	}
	// The window's oldest bucket is still in it.
	if got := s.Take("ring", sp, j0, 3, t0+999); got != 3 {
		t.Fatalf("take off the oldest bucket in the window: took %d; want 3", got)
	}
	checkSums(t, s, "after the window")
}

// Take never creates: an unknown counter, an unknown Spec and a shape that is no Spec
// take nothing and leave the store as it was.
func TestTakeCreatesNothing(t *testing.T) {
	sp := Spec{WindowMs: 1000, Buckets: 10}
	for _, deltas := range []bool{false, true} {
		var opts []Option
		if deltas {
			opts = append(opts, WithDeltas())
		}
		s := NewStore(opts...)
		s.Incr("held", sp, 3, t0)
		for _, c := range []struct {
			key string
			sp  Spec
		}{{"absent", sp}, {"held", Spec{WindowMs: 2000, Buckets: 10}}, {"held", Spec{WindowMs: 1000}}} {
			if got := s.Take(c.key, c.sp, sp.Bucket(t0), 1, t0); got != 0 {
				t.Fatalf("take off %s %v: took %d", c.key, c.sp, got)
			}
		}
		if s.Len() != 1 || len(s.tables.cur.Load().list) != 1 || s.Has("absent", sp) {
			t.Fatalf("after takes off what is not held: Len %d, %d tables; want 1 and 1", s.Len(), len(s.tables.cur.Load().list))
		}
		if got := s.Take("held", sp, sp.Bucket(t0), -5, t0); got != 0 || s.Count("held", sp, t0) != 3 {
			t.Fatalf("take of a negative n took %d; want nothing", got)
		}
	}
}

// With deltas, Take takes off what is pending as well, so Drain gives only what was
// spent; what was drained already is taken off memory alone.
func TestTakeOffPending(t *testing.T) {
	sp := Spec{WindowMs: 1000, Buckets: 10}
	j0 := sp.Bucket(t0)
	s := NewStore(WithDeltas())
	drained := func() map[string][]Bucket {
		got := map[string][]Bucket{}
		for _, d := range s.Drain(nil) {
			slices.SortFunc(d.Buckets, func(x, y Bucket) int { return cmp.Compare(x.Index, y.Index) })
			got[d.Key] = d.Buckets
			for _, b := range d.Buckets {
				if b.Count == 0 {
					t.Fatalf("%s drained an empty bucket: %v", d.Key, d.Buckets)
				}
			}
		}
		return got
	}
	want := func(step string, got map[string][]Bucket, w map[string][]Bucket) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("%s: drained %v; want %v", step, got, w)
		}
	}

	// The first bucket of an entry, partly and wholly taken.
	s.Incr("part", sp, 10, t0)
	s.Incr("all", sp, 10, t0)
	s.Incr("other", sp, 1, t0)
	s.Take("part", sp, j0, 4, t0)
	if got := s.Take("all", sp, j0, 10, t0); got != 10 {
		t.Fatalf("took %d; want 10", got)
	}
	want("first bucket", drained(), map[string][]Bucket{"part": {{j0, 6}}, "other": {{j0, 1}}})
	if bs, _ := s.Pending("all", sp); bs != nil {
		t.Fatalf("pending after all was taken: %v", bs)
	}

	// Drained already: memory is taken, nothing is left to drain.
	if got := s.Take("part", sp, j0, 4, t0+10); got != 4 || s.Count("part", sp, t0+10) != 2 {
		t.Fatalf("take off a drained bucket: took %d, count %d; want 4 and 2", got, s.Count("part", sp, t0+10))
	}
	want("drained already", drained(), map[string][]Bucket{})

	// Part drained: memory gives what it held, pending what it had.
	s.Incr("other", sp, 3, t0+20) // other holds 4 in j0, 3 of them pending
	if got := s.Take("other", sp, j0, 4, t0+20); got != 4 {
		t.Fatalf("took %d; want 4", got)
	}
	want("part drained", drained(), map[string][]Bucket{})

	// Buckets beside the entry's first (more): one after the first, and one past the
	// first's count bits.
	s.Incr("more", sp, 5, t0)
	s.Incr("more", sp, 7, t0+100)
	s.Incr("more", sp, 1<<20, t0+200)
	s.Take("more", sp, j0+1, 3, t0+200)
	s.Take("more", sp, j0+2, 1<<20-1, t0+200)
	if got := pendingAt(s, "more", sp, j0+1) + pendingAt(s, "more", sp, j0+2); got != 5 {
		t.Fatalf("pending beside the first bucket: %d; want 5", got)
	}
	s.Take("more", sp, j0, 5, t0+200) // the first emptied, the others kept
	want("more", drained(), map[string][]Bucket{"more": {{j0 + 1, 4}, {j0 + 2, 1}}})

	s.Incr("more", sp, 5, t0+300)
	s.Incr("more", sp, 6, t0+400)
	s.Take("more", sp, j0+4, 6, t0+400) // more emptied, the first kept
	s.Incr("more", sp, 2, t0+400)       // and added to again
	want("more emptied", drained(), map[string][]Bucket{"more": {{j0 + 3, 5}, {j0 + 4, 2}}})

	s.Incr("gone", sp, 5, t0+400)
	s.Incr("gone", sp, 7, t0+500)
	s.Take("gone", sp, j0+5, 7, t0+500)
	s.Take("gone", sp, j0+4, 5, t0+500) // nothing left pending: the entry goes
	s.Incr("gone", sp, 1, t0+500)       // and a new one keeps what comes next
	want("entry emptied", drained(), map[string][]Bucket{"gone": {{j0 + 5, 1}}})

	// A bucket that left the window takes nothing off memory, but is not written.
	s.Incr("late", sp, 9, t0+500)
	if got := s.Take("late", sp, j0+5, 9, t0+1500); got != 0 {
		t.Fatalf("take off a bucket that left the window: took %d", got)
	}
	want("left the window", drained(), map[string][]Bucket{})
	checkSums(t, s, "pending")
}

// Random adds and takes on a store with deltas, drained whole and in parts into a
// replica: given the part a take could not take off pending (it was drained), the
// replica counts what the store counts, and no drained bucket is empty.
func TestTakeKeepsDeltasExact(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	src, replica := NewStore(WithDeltas()), NewStore()
	now := int64(t0)
	var cursor DrainCursor
	apply := func(ds []Delta) {
		for _, d := range ds {
			for _, b := range d.Buckets {
				if b.Count == 0 {
					t.Fatalf("seed %d: %s drained an empty bucket: %v", seed, d.Key, d.Buckets)
				}
			}
			if d.Reset {
				replica.Reset(d.Key, d.Spec, now)
			}
			replica.Merge(d.Key, d.Spec, d.Buckets)
		}
	}
	specs := []Spec{{1000, 10}, {60_000, 10}, {10, 2}, {1000, 1}}
	keys := map[string]bool{}
	for i := 0; i < 20000; i++ {
		now += r.Int64N(40)
		key, sp := fmt.Sprint("k", r.IntN(40)), specs[r.IntN(len(specs))]
		keys[key] = true
		switch p := r.IntN(100); {
		case p < 40:
			src.Incr(key, sp, randN(r), now)
		case p < 55:
			src.Allow(key, sp, r.Int64N(40), randN(r), now)
		case p < 85:
			j := sp.Bucket(now) - r.Int64N(int64(sp.Buckets)+1)
			n := randN(r)
			before := pendingAt(src, key, sp, j)
			took := src.Take(key, sp, j, n, now)
			// What a take could not take off pending was written: the caller gives it
			// back where it was written.
			if written := took - int64(before-pendingAt(src, key, sp, j)); written > 0 {
				if got := replica.Take(key, sp, j, written, now); got != written {
					t.Fatalf("op %d (seed %d): the replica held %d of the %d written", i, seed, got, written)
				}
			}
		case p < 87:
			src.Reset(key, sp, now)
		case p < 93:
			ds, done := src.DrainSome(&cursor, nil, 1+r.IntN(4))
			apply(ds)
			if done {
				cursor = DrainCursor{}
			}
		default:
			apply(src.Drain(nil))
		}
	}
	apply(src.Drain(nil))
	checkSums(t, src, fmt.Sprintf("seed %d", seed))
	for key := range keys {
		for _, sp := range specs {
			if got, want := replica.Count(key, sp, now), src.Count(key, sp, now); got != want {
				t.Fatalf("%s %v (seed %d): replica counts %d; store %d", key, sp, seed, got, want)
			}
		}
	}
}
