package fallback

import (
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// Writes set the key's TTL to twice the window, at least MinTTL; reads leave it alone.
func TestTTLIsTwiceTheWindow(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), Config{MinTTL: DefaultMinTTL})
	rc := srv.Client(t)
	now := int64(1_700_000_000_000)
	for _, tc := range []struct {
		windowMs int64
		want     time.Duration
	}{{60_000, 120 * time.Second}, {3_600_000, 2 * time.Hour}, {10, DefaultMinTTL}} {
		sp := spec(tc.windowMs, 10)
		if _, err := st.Incr(bg, "ttl", sp, 1, now); err != nil {
			t.Fatal(err)
		}
		got := rc.PTTL(bg, counterKey("ttl", sp)).Val()
		if got <= tc.want-5*time.Second || got > tc.want {
			t.Errorf("window %dms: PTTL = %v; want about %v", tc.windowMs, got, tc.want)
		}
	}
}

// The TTL is set when the head moves (or the counter is new), and left alone by a write
// at the head bucket or an older one: the head's first write already set a TTL that
// outlives every bucket the hash holds, and skipping the PEXPIRE saves write-behind a
// command per counter per flush. The test stretches the TTL by hand, so that a refresh
// would show.
func TestTTLIsSetWhenTheHeadMoves(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), Config{MinTTL: DefaultMinTTL})
	rc := srv.Client(t)
	sp := spec(60_000, 10) // L = 6 s
	now := int64(1_700_000_000_000)
	key := counterKey("moves", sp)
	want := 2 * time.Minute
	pttl := func() time.Duration { return rc.PTTL(bg, key).Val() }
	merge := func(at int64) {
		t.Helper()
		if err := st.Merge(bg, "moves", sp, []leaparray.Bucket{{Index: sp.Bucket(at), Count: 1}}, at); err != nil {
			t.Fatal(err)
		}
	}
	merge(now)
	if got := pttl(); got <= want-5*time.Second || got > want {
		t.Fatalf("new counter: PTTL = %v; want about %v", got, want)
	}
	stretched := 3 * time.Hour
	rc.PExpire(bg, key, stretched)
	merge(now)         // the head bucket again
	merge(now - 6_000) // an older bucket
	if _, err := st.Incr(bg, "moves", sp, 1, now); err != nil {
		t.Fatal(err)
	}
	if got := pttl(); got <= stretched-5*time.Second {
		t.Fatalf("writes at or before the head: PTTL = %v; want the %v set by hand, untouched", got, stretched)
	}
	merge(now + 6_000) // the head moves
	if got := pttl(); got <= want-5*time.Second || got > want {
		t.Fatalf("head moved: PTTL = %v; want about %v", got, want)
	}
	if got, err := st.Count(bg, "moves", sp, now+6_000); err != nil || got != 5 {
		t.Fatalf("count = %d, %v; want 5", got, err)
	}
}

// The hash holds h, s and the non-zero buckets in the window at the head, nothing
// else: buckets leave as the head passes them, through either way of finding them (the
// named fields, or the whole hash when it is smaller).
func TestStaleFieldsAreRemoved(t *testing.T) {
	srv, st := startStore(t)
	rc := srv.Client(t)
	sp := spec(10_000, 100) // L = 100 ms
	t0 := int64(1_700_000_000_000)
	fields := func(key string) []string {
		f := rc.HKeys(bg, counterKey(key, sp)).Val()
		sort.Strings(f)
		return f
	}
	want := func(js ...int64) []string {
		w := []string{"h", "s"}
		for _, j := range js {
			w = append(w, strconv.FormatInt(sp.Bucket(t0)+j, 10))
		}
		sort.Strings(w)
		return w
	}
	for i := range int64(100) { // dense: every bucket filled
		mustIncr(t, st, "dense", sp, t0+i*100)
	}
	// 5 buckets leave: HMGET of 5 named fields. Left: buckets 5..99 and 104.
	mustIncr(t, st, "dense", sp, t0+104*100)
	var left []int64
	for j := int64(5); j < 100; j++ {
		left = append(left, j)
	}
	if got, w := fields("dense"), want(append(left, 104)...); !slices.Equal(got, w) {
		t.Fatalf("dense fields = %v; want %v", got, w)
	}
	mustIncr(t, st, "sparse", sp, t0)
	mustIncr(t, st, "sparse", sp, t0+60*100)
	mustIncr(t, st, "sparse", sp, t0+130*100) // 31 buckets leave, hash has 4 fields: HGETALL
	if got, w := fields("sparse"), want(60, 130); !slices.Equal(got, w) {
		t.Fatalf("sparse fields = %v; want %v", got, w)
	}
	mustIncr(t, st, "sparse", sp, t0+10_000*100) // many windows: a fresh hash
	if got, w := fields("sparse"), want(10_000); !slices.Equal(got, w) {
		t.Fatalf("fields after a long jump = %v; want %v", got, w)
	}
}

func mustIncr(t *testing.T, st *Store, key string, sp leaparray.Spec, now int64) int64 {
	t.Helper()
	c, err := st.Incr(bg, key, sp, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Concurrent allows on one counter admit exactly limit: each script is atomic.
func TestConcurrentAllowAdmitsExactlyLimit(t *testing.T) {
	_, st := startStore(t)
	sp := spec(60_000, 10)
	const limit, workers, each = 100, 8, 40
	now := int64(1_700_000_000_000)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				d, err := st.Allow(bg, "hot", sp, limit, 1, now)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != limit {
		t.Fatalf("allowed %d of %d; want %d", allowed, workers*each, limit)
	}
}

// The largest ring (3600 buckets) filled, then moved 3599 buckets on: the script reads
// and deletes 3599 fields in one step (within Lua's argument limits) and still agrees
// with the in-memory store, as does a denied allow that walks the whole ring.
func TestLargestRingAdvance(t *testing.T) {
	_, st := startStore(t)
	mem := newMem()
	sp := spec(3600, 3600) // L = 1 ms
	t0 := int64(1_700_000_000_000)
	var deltas []leaparray.Bucket
	for j := range int64(3600) {
		deltas = append(deltas, leaparray.Bucket{Index: sp.Bucket(t0) + j, Count: uint64(j%7 + 1)})
	}
	mem.Merge("big", sp, deltas)
	if err := st.Merge(bg, "big", sp, deltas, t0); err != nil {
		t.Fatal(err)
	}
	now := t0 + 3599
	for _, step := range []int64{0, 3599, 1} {
		now += step
		d, err := st.Allow(bg, "big", sp, 20, 15, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := mem.Allow("big", sp, 20, 15, now); d != want {
			t.Fatalf("allow at +%d: %+v; want %+v", now-t0, d, want)
		}
		got, err := st.Incr(bg, "big", sp, 1, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := mem.Incr("big", sp, 1, now); got != want {
			t.Fatalf("incr at +%d: %d; want %d", now-t0, got, want)
		}
	}
}
