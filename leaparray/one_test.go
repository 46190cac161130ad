package leaparray

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// tierOf is the slab key's counter is in, or -1 when it is not held.
func tierOf(s *Store, key string, sp Spec) tier {
	tr := tier(255)
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		if r, ok := sh.find(key, h); ok {
			tr = r.tier
		}
	})
	return tr
}

// A counter stays in the one-bucket form while all of its count is in its head bucket,
// moves into a ring at its second bucket within a window, and into a wide ring when a
// bucket overflows uint32.
func TestOneBucketForm(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 10} // buckets of 100 ms
	steps := []struct {
		key  string
		now  int64
		n    int64
		want tier
	}{
		{"a", t0, 1, one},
		{"a", t0 + 99, 5, one},                 // the same bucket
		{"a", t0 + 1000, 1, one},               // a window later: the first bucket has left
		{"a", t0 + 900, 1, one},                // the clock stepped back: it acts at the head bucket
		{"a", t0 + 1100, 1, narrow},            // a second bucket within the window
		{"big", t0, 1 << 40, one},              // a count past uint32 in one bucket
		{"big", t0 + 100, 1, wide},             // goes straight to a wide ring
		{"c", t0, 3_000_000_000, one},          //
		{"c", t0 + 100, 3_000_000_000, narrow}, // the head bucket fits; the new one, too
		{"c", t0 + 100, 3_000_000_000, wide},   // and now overflows
	}
	for i, st := range steps {
		s.Incr(st.key, sp, st.n, st.now)
		if got := tierOf(s, st.key, sp); got != st.want {
			t.Fatalf("step %d, %q at %d: got tier %d; want %d", i, st.key, st.now-t0, got, st.want)
		}
	}
	for _, c := range []struct {
		key  string
		now  int64
		want int64
	}{{"a", t0 + 1100, 3}, {"a", t0 + 2050, 1}, {"big", t0 + 100, 1<<40 + 1}, {"c", t0 + 1000, 6_000_000_000}} {
		if got := s.Count(c.key, sp, c.now); got != c.want {
			t.Errorf("count %q at %d: got %d; want %d", c.key, c.now-t0, got, c.want)
		}
	}
	// Allow decides in the one-bucket form too, and its retry is when the head bucket leaves.
	s.Incr("d", sp, 3, t0+250)
	if got, want := s.Allow("d", sp, 3, 1, t0+420), (Decision{Count: 3, RetryAfterMs: t0 + 1200 - (t0 + 420)}); got != want {
		t.Errorf("allow on a full one-bucket counter: got %+v; want %+v", got, want)
	}
	if got := tierOf(s, "d", sp); got != narrow { // widened for the add it was asked to make
		t.Errorf("after a denied allow at a new bucket: got tier %d; want %d", got, narrow)
	}
}

// The store, whatever form each counter is in, answers as the standalone LeapArray, which
// always has a whole ring: random adds, counts, allows, snapshots and merges, with the
// clock stepping back and skipping forward.
func TestStoreMatchesLeapArray(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for _, sp := range propertySpecs {
		s := NewStore(WithDeltas())
		rings := map[string]*LeapArray{}
		clock := &propClock{now: 1_700_000_000_000}
		for i := 0; i < 20000; i++ {
			clock.step(r)
			key := fmt.Sprint("k", r.IntN(8))
			a := rings[key]
			if a == nil {
				a, _ = New(sp)
				rings[key] = a
			}
			where := fmt.Sprintf("spec %v op %d (seed %d) key %s now %d", sp, i, seed, key, clock.now)
			switch p := r.IntN(100); {
			case p < 35:
				n := randN(r)
				if got, want := s.Incr(key, sp, n, clock.now), a.Add(clock.now, n); got != want {
					t.Fatalf("%s: incr %d: got %d; want %d", where, n, got, want)
				}
			case p < 55:
				if got, want := s.Count(key, sp, clock.now), a.Count(clock.now); got != want {
					t.Fatalf("%s: count: got %d; want %d", where, got, want)
				}
			case p < 80:
				n, limit := randN(r), r.Int64N(50)
				if got, want := s.Allow(key, sp, limit, n, clock.now), a.Allow(clock.now, limit, n); got != want {
					t.Fatalf("%s: allow(limit %d, n %d): got %+v; want %+v", where, limit, n, got, want)
				}
			case p < 90:
				if got, want := s.Snapshot(key, sp, clock.now), a.Snapshot(clock.now); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: snapshot: got %v; want %v", where, got, want)
				}
			default:
				bs := randBuckets(r, sp.Bucket(clock.now), sp.Buckets)
				s.Merge(key, sp, bs)
				a.Merge(bs)
			}
		}
		s.Drain(nil)
	}
}

// randBuckets is a snapshot near bucket j: one bucket mostly, a few at times.
func randBuckets(r *rand.Rand, j int64, b int) []Bucket {
	bs := []Bucket{{Index: j - r.Int64N(int64(2*b)) + int64(b)/2, Count: uint64(1 + r.IntN(9))}}
	for k := r.IntN(4); k > 0 && r.IntN(2) == 0; k-- {
		bs = append([]Bucket{{Index: bs[0].Index - 1 - r.Int64N(int64(b)), Count: uint64(r.IntN(3))}}, bs...)
	}
	return bs
}
