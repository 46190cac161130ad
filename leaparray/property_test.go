package leaparray

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var propertySpecs = []Spec{{1000, 10}, {60_000, 10}, {10, 1}, {7, 7}, {3_600_000, 3600}, {500, 5}}

// clock walks time the way the property tests need: mostly small steps forward, some
// bucket-sized and window-sized skips, rare huge jumps, and steps back of every size.
func (c *propClock) step(r *rand.Rand) {
	switch p := r.IntN(100); {
	case p < 50:
		c.now += r.Int64N(20)
	case p < 75:
		c.now += r.Int64N(2000)
	case p < 85:
		c.now += r.Int64N(4_000_000)
	case p < 88:
		c.now += r.Int64N(1 << 40)
	case p < 95:
		c.now -= r.Int64N(1500)
	default:
		c.now -= r.Int64N(8_000_000)
	}
}

type propClock struct{ now int64 }

// TestStoreMatchesModel runs random operations against the store and the model and
// compares every answer.
func TestStoreMatchesModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	s, m := NewStore(), newModel()
	clock := &propClock{now: 1_700_000_000_000}
	keys := []string{"a", "b", "c", "d", string(make([]byte, 300))}
	for i := 0; i < 40000; i++ {
		clock.step(r)
		key, sp := keys[r.IntN(len(keys))], propertySpecs[r.IntN(len(propertySpecs))]
		where := fmt.Sprintf("op %d (seed %d): key %q spec %v now %d", i, seed, key[:min(len(key), 4)], sp, clock.now)
		switch p := r.IntN(100); {
		case p < 40:
			n := randN(r)
			if got, want := s.Incr(key, sp, n, clock.now), m.incr(key, sp, n, clock.now); got != want {
				t.Fatalf("%s: incr %d: got %d; want %d", where, n, got, want)
			}
		case p < 52:
			if got, want := s.Count(key, sp, clock.now), m.count(key, sp, clock.now); got != want {
				t.Fatalf("%s: count: got %d; want %d", where, got, want)
			}
		case p < 60:
			j, n := takeBucket(r, m, key, sp, clock.now), randN(r)
			if got, want := s.Take(key, sp, j, n, clock.now), m.take(key, sp, j, n, clock.now); got != want {
				t.Fatalf("%s: take %d off bucket %d: got %d; want %d", where, n, j, got, want)
			}
		case p < 90:
			n, limit := randN(r), r.Int64N(50)
			if got, want := s.Allow(key, sp, limit, n, clock.now), m.allow(key, sp, limit, n, clock.now); got != want {
				t.Fatalf("%s: allow(limit %d, n %d): got %+v; want %+v", where, limit, n, got, want)
			}
		case p < 93:
			if got, want := s.Reset(key, sp, clock.now), m.reset(key, sp, clock.now); got != want {
				t.Fatalf("%s: reset: got %v; want %v", where, got, want)
			}
		default:
			if got, want := s.Sweep(clock.now, 1<<30), m.sweep(clock.now); got != want {
				t.Fatalf("%s: sweep removed %d; want %d", where, got, want)
			}
		}
		if got, want := s.Len(), len(m.counters); i%97 == 0 && got != want {
			t.Fatalf("%s: Len: got %d; want %d", where, got, want)
		}
	}
}

// TestLeapArrayMatchesModel does the same for the standalone ring.
func TestLeapArrayMatchesModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, sp := range propertySpecs {
		a, _ := New(sp)
		m := newModel()
		clock := &propClock{now: 1_700_000_000_000}
		for i := 0; i < 5000; i++ {
			clock.step(r)
			where := fmt.Sprintf("spec %v op %d (seed %d) now %d", sp, i, seed, clock.now)
			switch p := r.IntN(10); {
			case p < 4:
				n := randN(r)
				if got, want := a.Add(clock.now, n), m.incr("", sp, n, clock.now); got != want {
					t.Fatalf("%s: add %d: got %d; want %d", where, n, got, want)
				}
			case p < 7:
				if got, want := a.Count(clock.now), m.count("", sp, clock.now); got != want {
					t.Fatalf("%s: count: got %d; want %d", where, got, want)
				}
			default:
				n, limit := randN(r), r.Int64N(50)
				if got, want := a.Allow(clock.now, limit, n), m.allow("", sp, limit, n, clock.now); got != want {
					t.Fatalf("%s: allow(limit %d, n %d): got %+v; want %+v", where, limit, n, got, want)
				}
			}
		}
	}
}

// takeBucket picks a bucket to take from: mostly one that was added to, else one near
// now's, in the window or just out of it.
func takeBucket(r *rand.Rand, m *model, key string, sp Spec, now int64) int64 {
	if c := m.counters[modelKey{key, sp}]; c != nil && len(c.events) > 0 && r.IntN(3) > 0 {
		return c.events[r.IntN(len(c.events))].bucket
	}
	return sp.Bucket(now) + 1 - r.Int64N(int64(sp.Buckets)+2)
}

func randN(r *rand.Rand) int64 {
	if r.IntN(20) == 0 {
		return 1 + r.Int64N(1<<31-1) // large adds push narrow buckets into wide ones
	}
	return 1 + r.Int64N(5)
}
