package leaparray

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFloodStaysUnderTheCap sends 2M distinct keys at a store capped at 10k units that
// already holds 1000 counters: the store never holds more than the cap, the counters
// it held keep counting exactly, new keys get ErrFull once it is full, and once the
// flood's counters have left their window new keys are admitted again (reclaimed on
// demand, with no sweep running).
func TestFloodStaysUnderTheCap(t *testing.T) {
	rng := seeded(t, 0)
	const maxUnits, existing, flood = 10_000, 1000, 2_000_000
	s := NewStore(WithBounds(Bounds{MaxUnits: maxUnits, MaxShapes: 8}))
	kept := Spec{WindowMs: 60_000, Buckets: 10}
	short := Spec{WindowMs: 1000, Buckets: 10}
	want := make([]int64, existing)
	touch := func(k int, now int64) {
		want[k]++
		if c, err := s.TryIncr(userKey(k), kept, 1, now); err != nil || c != want[k] {
			t.Fatalf("existing counter %d at %d: got %d, %v; want %d, nil", k, now, c, err, want[k])
		}
	}
	for k := range existing {
		touch(k, t0)
	}
	admitted := 0
	var key []byte
	for i := 0; i < flood; i++ {
		now := t0 + int64(i/10_000) // the flood takes 200ms: all of it stays in its window
		key = strconv.AppendInt(append(key[:0], "flood:"...), int64(i), 10)
		switch _, err := s.TryIncr(string(key), short, 1, now); {
		case err == nil:
			admitted++
		case !errors.Is(err, ErrFull):
			t.Fatalf("flood key %d: got error %v; want nil or ErrFull", i, err)
		}
		if i%2000 == 0 {
			touch(rng.IntN(existing), now)
			if used := s.Used(); used > maxUnits {
				t.Fatalf("after %d flood keys the store holds %d units; want at most %d", i+1, used, maxUnits)
			}
		}
	}
	if admitted != maxUnits-existing {
		t.Errorf("flood keys admitted: got %d; want %d", admitted, maxUnits-existing)
	}
	if got := s.Len(); got != maxUnits {
		t.Errorf("Len after the flood: got %d; want %d", got, maxUnits)
	}
	// The flood's last bucket leaves its window by t0+1200; the kept counters stay.
	later := int64(t0 + 1500)
	for i := range maxUnits - existing {
		if _, err := s.TryIncr("again:"+strconv.Itoa(i), short, 1, later); err != nil {
			t.Fatalf("new key %d after the flood expired: got %v; want it admitted", i, err)
		}
	}
	if _, err := s.TryIncr("one-too-many", short, 1, later); !errors.Is(err, ErrFull) {
		t.Errorf("new key in a store full of live counters: got %v; want ErrFull", err)
	}
	touch(rng.IntN(existing), later)
	for k := range existing {
		if got := s.Count(userKey(k), kept, later); got != want[k] {
			t.Fatalf("existing counter %d after the flood: got %d; want %d", k, got, want[k])
		}
	}
}

func userKey(k int) string { return "user:" + strconv.Itoa(k) }

// TestBoundedOpsRefuseOnlyWhatTheyWouldCreate checks each bounded operation on a full
// store: it refuses a counter it would have to create, changing nothing, and works on
// the counters held; the admitting operations (handed-over state) create past the cap,
// and Admits stops them at twice it.
func TestBoundedOpsRefuseOnlyWhatTheyWouldCreate(t *testing.T) {
	s := NewStore(WithBounds(Bounds{MaxUnits: 4}))
	sp := Spec{WindowMs: 10_000, Buckets: 10}
	wide := Spec{WindowMs: 3600, Buckets: 36} // 3 units
	if _, err := s.TryIncr("a", sp, 1, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryIncr("w", wide, 1, t0); err != nil {
		t.Fatal(err)
	}
	if got := s.Used(); got != 4 {
		t.Fatalf("Used: got %d; want 4 (1 + 3 for 36 buckets)", got)
	}
	if _, err := s.TryAllow("b", sp, 10, 1, t0); !errors.Is(err, ErrFull) {
		t.Errorf("TryAllow of a new counter: got %v; want ErrFull", err)
	}
	if d, err := s.TryAllow("b", sp, 1, 2, t0); err != nil || d.Allowed || d.RetryAfterMs != -1 {
		t.Errorf("TryAllow with n over the limit: got %+v, %v; want denied for ever, no error", d, err)
	}
	if ok, err := s.TrySeed("b", sp, []Bucket{{Index: sp.Bucket(t0), Count: 3}}, t0, s.ResetMark()); ok || !errors.Is(err, ErrFull) {
		t.Errorf("TrySeed of a new counter: got %v, %v; want false, ErrFull", ok, err)
	}
	if s.Has("b", sp) {
		t.Errorf("refused counter is held")
	}
	if d, err := s.TryAllow("a", sp, 10, 1, t0); err != nil || !d.Allowed || d.Count != 2 {
		t.Errorf("TryAllow of a held counter: got %+v, %v; want allowed, count 2", d, err)
	}
	if existed, err := s.TryReset("a", sp, t0); err != nil || !existed {
		t.Errorf("TryReset of a held counter: got %v, %v; want true, nil", existed, err)
	}
	if _, err := s.TryIncr("c", sp, 1, t0); err != nil { // the reset made room
		t.Errorf("TryIncr after a reset freed a unit: got %v; want nil", err)
	}
	// Handed-over state goes in past the cap, up to twice it.
	s.Merge("m", sp, []Bucket{{Index: sp.Bucket(t0), Count: 1}})
	s.Seed("n", sp, []Bucket{{Index: sp.Bucket(t0), Count: 1}})
	if got := s.Used(); got != 6 {
		t.Errorf("Used after admitting two: got %d; want 6", got)
	}
	if err := s.Admits([]Spec{sp, sp}); err != nil {
		t.Errorf("Admits two more (8 of a cap of 4): got %v; want nil", err)
	}
	if err := s.Admits([]Spec{sp, sp, sp}); !errors.Is(err, ErrFull) {
		t.Errorf("Admits three more (9 of a cap of 4): got %v; want ErrFull", err)
	}
}

// TestShapeCap checks that a bounded operation adds no Spec past MaxShapes, that the
// Specs held keep working, and that a new Spec is admitted once a sweep pass has found
// an old one empty.
func TestShapeCap(t *testing.T) {
	s := NewStore(WithBounds(Bounds{MaxShapes: 4}), WithDeltas())
	shape := func(i int) Spec { return Spec{WindowMs: int64(1000 * (i + 1)), Buckets: 10} }
	for i := range 4 {
		if _, err := s.TryIncr("k", shape(i), 1, t0); err != nil {
			t.Fatalf("shape %d of 4: %v", i, err)
		}
	}
	if _, err := s.TryIncr("k", shape(4), 1, t0); !errors.Is(err, ErrTooManyShapes) {
		t.Errorf("fifth shape: got %v; want ErrTooManyShapes", err)
	}
	if _, err := s.TryReset("k", shape(4), t0); !errors.Is(err, ErrTooManyShapes) {
		t.Errorf("reset recorded under a fifth shape: got %v; want ErrTooManyShapes", err)
	}
	if c, err := s.TryIncr("k", shape(3), 1, t0); err != nil || c != 2 {
		t.Errorf("held shape: got %d, %v; want 2, nil", c, err)
	}
	if got := s.Shapes(); got != 4 {
		t.Errorf("Shapes: got %d; want 4", got)
	}
	if err := s.Admits([]Spec{shape(4), shape(5), shape(6), shape(7)}); err != nil {
		t.Errorf("Admits four new shapes (8 of a cap of 4): got %v; want nil", err)
	}
	if err := s.Admits([]Spec{shape(4), shape(5), shape(6), shape(7), shape(8)}); !errors.Is(err, ErrTooManyShapes) {
		t.Errorf("Admits five new shapes (9 of a cap of 4): got %v; want ErrTooManyShapes", err)
	}
	// shape(0)'s counter leaves its 1s window; a full pass (after the drain that owes
	// nothing more to Redis) drops its table.
	s.Drain(nil)
	s.Sweep(t0+1000, 1<<20)
	if _, err := s.TryIncr("k", shape(4), 1, t0+1000); err != nil {
		t.Errorf("new shape after an old one was swept: got %v; want nil", err)
	}
}

// TestConcurrentFloodAdmitsExactlyTheCap floods a store from several goroutines: with
// nothing removed meanwhile, exactly the cap is admitted, never more.
func TestConcurrentFloodAdmitsExactlyTheCap(t *testing.T) {
	const maxUnits, workers, perWorker = 5000, 4, 20_000
	s := NewStore(WithBounds(Bounds{MaxUnits: maxUnits}))
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if _, err := s.TryIncr(strconv.Itoa(w)+":"+strconv.Itoa(i), sp, 1, t0); err == nil {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != maxUnits {
		t.Errorf("admitted: got %d; want %d", got, maxUnits)
	}
	if got := s.Len(); got != maxUnits {
		t.Errorf("Len: got %d; want %d", got, maxUnits)
	}
}

// seeded is a random source for a randomized test, its seed printed so that a failing
// run can be replayed; stream tells the tests' sources apart.
func seeded(t *testing.T, stream uint64) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, stream))
}
