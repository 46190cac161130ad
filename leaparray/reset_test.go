package leaparray

import (
	"errors"
	"slices"
	"testing"
)

// drained drains s and returns its deltas by key.
func drained(t *testing.T, s *Store) map[string]Delta {
	t.Helper()
	out := map[string]Delta{}
	for _, d := range s.Drain(nil) {
		if _, dup := out[d.Key]; dup {
			t.Fatalf("%s drained twice in one Drain", d.Key)
		}
		out[d.Key] = d
	}
	return out
}

// A reset is drained in order with the adds: incr, reset, incr before one drain gives
// one delta that resets and then adds only the last incr; a reset of a counter not in
// memory (its state may be only in Redis) is drained too; two resets are one.
func TestResetIsOrderedWithDeltas(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	other := Spec{WindowMs: 2000, Buckets: 2} // no table yet
	s.Incr("k", sp, 5, t0)
	s.Reset("k", sp, t0+10)
	s.Incr("k", sp, 3, t0+20)
	s.Reset("away", sp, t0)
	s.Reset("twice", sp, t0)
	s.Reset("twice", sp, t0+1)
	s.Reset("new-spec", other, t0)
	s.Incr("plain", sp, 2, t0)
	got := drained(t, s)
	want := map[string]Delta{
		"k":        {Key: "k", Spec: sp, Reset: true, Buckets: []Bucket{{Index: sp.Bucket(t0), Count: 3}}},
		"away":     {Key: "away", Spec: sp, Reset: true},
		"twice":    {Key: "twice", Spec: sp, Reset: true},
		"new-spec": {Key: "new-spec", Spec: other, Reset: true},
		"plain":    {Key: "plain", Spec: sp, Buckets: []Bucket{{Index: sp.Bucket(t0), Count: 2}}},
	}
	if len(got) != len(want) {
		t.Fatalf("drained %v; want %v", got, want)
	}
	for k, w := range want {
		if g := got[k]; g.Spec != w.Spec || g.Reset != w.Reset || !slices.Equal(g.Buckets, w.Buckets) {
			t.Fatalf("%s: drained %+v; want %+v", k, g, w)
		}
	}
	if ds := s.Drain(nil); len(ds) != 0 {
		t.Fatalf("a second drain found %v; want nothing", ds)
	}
	if got := s.Count("k", sp, t0+20); got != 3 {
		t.Fatalf("count after reset and incr: got %d; want 3", got)
	}
}

// A store without deltas records no reset.
func TestResetWithoutDeltasRecordsNothing(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 10}
	s.Incr("k", sp, 1, t0)
	if !s.Reset("k", sp, t0) || s.Reset("away", Spec{WindowMs: 2000, Buckets: 2}, t0) {
		t.Fatal("Reset: want true for the held counter, false for the other")
	}
	if ds := s.Drain(nil); len(ds) != 0 {
		t.Fatalf("drained %v; want nothing", ds)
	}
	if n := len(s.tables.cur.Load().list); n != 1 {
		t.Fatalf("tables: got %d; want 1 (a reset makes none without deltas)", n)
	}
}

// Evict carries a reset not yet drained: with the adds after it as Pending for a held
// counter, alone for one not held. Nothing of them is drained afterwards.
func TestEvictCarriesReset(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	s.Incr("p:held", sp, 4, t0)
	s.Drain(nil)
	s.Incr("p:held", sp, 1, t0)
	s.Reset("p:held", sp, t0)
	s.Incr("p:held", sp, 2, t0+100)
	s.Incr("p:plain", sp, 1, t0)
	s.Reset("p:away", sp, t0)
	s.Reset("q:away", sp, t0)
	got := map[string]Evicted{}
	for _, ev := range s.Evict(func(k string) bool { return k[0] == 'p' }) {
		got[ev.Key] = ev
	}
	held := Evicted{Key: "p:held", Spec: sp, Reset: true,
		Buckets: []Bucket{{Index: sp.Bucket(t0 + 100), Count: 2}}, Pending: []Bucket{{Index: sp.Bucket(t0 + 100), Count: 2}}}
	if g := got["p:held"]; !g.Reset || !slices.Equal(g.Pending, held.Pending) || !slices.Equal(g.Buckets, held.Buckets) {
		t.Fatalf("p:held evicted as %+v; want %+v", g, held)
	}
	if g := got["p:away"]; !g.Reset || g.Spec != sp || len(g.Buckets) != 0 || len(g.Pending) != 0 {
		t.Fatalf("p:away evicted as %+v; want a reset alone", g)
	}
	if g := got["p:plain"]; g.Reset || len(g.Pending) != 1 {
		t.Fatalf("p:plain evicted as %+v; want its add pending and no reset", g)
	}
	if len(got) != 3 {
		t.Fatalf("evicted %v; want p:held, p:away and p:plain", got)
	}
	ds := drained(t, s)
	if len(ds) != 1 || !ds["q:away"].Reset {
		t.Fatalf("drained after evict: %v; want only q:away's reset", ds)
	}
}

// AddPending records a held counter's buckets and reset as pending without changing its
// counts; a counter not held gets nothing.
func TestAddPending(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	j := sp.Bucket(t0)
	if !s.Seed("k", sp, []Bucket{{Index: j - 1, Count: 5}, {Index: j, Count: 7}}) {
		t.Fatal("Seed: want true")
	}
	if !s.AddPending("k", sp, []Bucket{{Index: j, Count: 7}}, true) {
		t.Fatal("AddPending on a held counter: want true")
	}
	if s.AddPending("absent", sp, []Bucket{{Index: j, Count: 1}}, true) {
		t.Fatal("AddPending on a counter not held: want false")
	}
	if got := s.Count("k", sp, t0); got != 12 {
		t.Fatalf("count after AddPending: got %d; want 12 (unchanged)", got)
	}
	ds := drained(t, s)
	if d := ds["k"]; len(ds) != 1 || !d.Reset || !slices.Equal(d.Buckets, []Bucket{{Index: j, Count: 7}}) {
		t.Fatalf("drained %v; want k with Reset and bucket %d: 7", ds, j)
	}
}

// A table whose counters are all gone but that owes a reset is kept until it is drained.
func TestSweepKeepsAResetOwed(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 1000, Buckets: 10}
	s.Incr("k", sp, 1, t0)
	s.Reset("k", sp, t0)
	for range 3 { // full passes: each ends with dropEmptyTables
		s.Sweep(t0+5000, 1<<20)
	}
	if ds := drained(t, s); !ds["k"].Reset {
		t.Fatalf("drained %v after sweeps; want k's reset", ds)
	}
	for range 3 {
		s.Sweep(t0+5000, 1<<20)
	}
	if n := len(s.tables.cur.Load().list); n != 0 {
		t.Fatalf("tables after the reset was drained: got %d; want 0", n)
	}
}

// State loaded before a reset must not bring the erased count back: TrySeed with the
// mark taken before the load refuses once any counter was reset since.
func TestTrySeedRefusesStateLoadedBeforeAReset(t *testing.T) {
	s := NewStore(WithDeltas())
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	now := int64(1_700_000_000_000)
	loaded := []Bucket{{Index: sp.Bucket(now), Count: 5}}
	mark := s.ResetMark()
	s.Reset("k", sp, now)
	if ok, err := s.TrySeed("k", sp, loaded, now, mark); ok || !errors.Is(err, ErrResetSince) {
		t.Fatalf("TrySeed after a reset: got %v, %v; want false, ErrResetSince", ok, err)
	}
	if got := s.Count("k", sp, now); got != 0 {
		t.Fatalf("count after the refused seed: %d; want 0", got)
	}
	if ok, err := s.TrySeed("k", sp, loaded, now, s.ResetMark()); !ok || err != nil {
		t.Fatalf("TrySeed with a fresh mark: got %v, %v; want true, nil", ok, err)
	}
}
