package leaparray

import (
	"fmt"
	"slices"
	"testing"
)

// A counter a count made since the last drain keeps no pending entry, only its mark,
// and drains whole through each change that could move it or make its ring differ from
// what is pending: a move into a ring and into a wide ring, a merge, a pending part recorded alone, a take, an evict, a drain of some
// keys. A counter held before the drain still gets an entry.
func TestMarkedCountersDrainWhole(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	j := sp.Bucket(t0)
	at := func(k int64) int64 { return (j + k) * sp.BucketMs() }
	s.Incr("old", sp, 1, at(0))
	s.Incr("gone", sp, 1, at(0))
	s.Drain(nil)
	for _, k := range []string{"ring", "wide", "merged", "handed", "taken", "evicted", "matched"} {
		s.Incr(k, sp, 2, at(0))
	}
	s.Incr("old", sp, 3, at(0))
	if got := entries(s); got != 1 {
		t.Fatalf("%d pending entries; want 1 (old's): the new counters are marked", got)
	}
	if got := s.PendingCounters(); got != 8 {
		t.Fatalf("PendingCounters %d; want 8", got)
	}
	s.Incr("ring", sp, 3, at(1))                           // one bucket to a ring
	s.Incr("wide", sp, 1<<32, at(1))                       // to a wide ring at once
	s.Incr("gone", sp, 1, at(3))                           // …
	s.Reset("gone", sp, at(3))                             // and its removal moves the last counter into its slot
	s.Merge("merged", sp, []Bucket{{Index: j, Count: 10}}) // state from elsewhere: not pending
	s.AddPending("handed", sp, []Bucket{{Index: j, Count: 4}}, false)
	s.Take("taken", sp, j, 1, at(0))
	ev := s.Evict(func(k string) bool { return k == "evicted" })
	if len(ev) != 1 || !slices.Equal(ev[0].Pending, []Bucket{{Index: j, Count: 2}}) {
		t.Fatalf("evicted %v; want its pending %d: 2", ev, j)
	}
	ds := s.DrainMatching(func(k string) bool { return k == "matched" }, nil)
	if len(ds) != 1 || !slices.Equal(ds[0].Buckets, []Bucket{{Index: j, Count: 2}}) {
		t.Fatalf("DrainMatching gave %v; want matched's %d: 2", ds, j)
	}
	for _, k := range []string{"ring", "wide", "merged", "handed", "taken"} {
		if s.Has(k, sp) && s.Count(k, sp, at(1)) == 0 {
			t.Fatalf("%s lost its count", k)
		}
	}
	want := map[string]string{
		"ring":   fmt.Sprint([]Bucket{{j, 2}, {j + 1, 3}}),
		"wide":   fmt.Sprint([]Bucket{{j, 2}, {j + 1, 1 << 32}}),
		"merged": fmt.Sprint([]Bucket{{j, 2}}),
		"handed": fmt.Sprint([]Bucket{{j, 6}}),
		"taken":  fmt.Sprint([]Bucket{{j, 1}}),
		"old":    fmt.Sprint([]Bucket{{j, 3}}),
		"gone":   "[]",
	}
	got := map[string]string{}
	for k, d := range drained(t, s) {
		got[k] = fmt.Sprint(d.Buckets)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("drained %v;\nwant    %v", got, want)
	}
	if n := s.PendingCounters(); n != 0 {
		t.Fatalf("PendingCounters after a drain: %d", n)
	}
}

// A marked counter that a removal moves below fresh, into a slot drained before, gets an
// entry with its ring there, and drains whole.
func TestMarkedCounterMovedBelowFresh(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	j := sp.Bucket(t0)
	keys := keysInOneShard(s, sp, 3)
	s.Incr(keys[0], sp, 1, t0)
	s.Incr(keys[1], sp, 1, t0)
	s.Drain(nil)
	s.Incr(keys[2], sp, 5, t0) // marked, in the slot after the two drained
	if got := entries(s); got != 0 {
		t.Fatalf("%d pending entries; want none", got)
	}
	s.Reset(keys[0], sp, t0) // keys[2] moves into slot 0
	if got := entries(s); got != 1 {
		t.Fatalf("%d pending entries after the move; want 1", got)
	}
	s.Incr(keys[2], sp, 2, t0)
	ds := drained(t, s)
	if d := ds[keys[2]]; !slices.Equal(d.Buckets, []Bucket{{j, 7}}) {
		t.Fatalf("drained %v; want %s with %d: 7", ds, keys[2], j)
	}
}

// keysInOneShard returns n keys that fall in the same shard of sp's table.
func keysInOneShard(s *Store, sp Spec, n int) []string {
	s.Incr("probe", sp, 0, t0) // makes the table
	s.Reset("probe", sp, t0)
	s.Drain(nil)
	tb := s.tables.get(sp)
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprint("k", i)
		if tb.shard(hashKey(k)) == tb.shard(hashKey("k0")) {
			out = append(out, k)
		}
	}
	return out
}

// entries is how many pending entries the store's slabs hold.
func entries(s *Store) int {
	n := 0
	s.eachShard(func(_ *table, sh *shard) { n += len(sh.one.dl.s) + len(sh.narrow.dl.s) + len(sh.wide.dl.s) })
	return n
}
