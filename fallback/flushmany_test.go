package fallback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

var flushSpecs = []leaparray.Spec{spec(10_000, 10), spec(60_000, 60), spec(3_600_000, 3600), spec(3600, 3600)}

// randomDelta makes the buckets of one delta for a counter whose head is head (0 when
// new): mostly one bucket at or just behind now, or at the edges of the window at the
// head (write-behind's common case, and the off-by-ones); else several in any order with
// repeats and zeros, buckets older than the window, a whole ring (3600 buckets for the
// large shapes), or buckets ahead that move the head.
func randomDelta(rng *rand.Rand, sp leaparray.Spec, now, head int64) []leaparray.Bucket {
	j, b := sp.Bucket(now), int64(sp.Buckets)
	var bs []leaparray.Bucket
	add := func(i int64, c uint64) { bs = append(bs, leaparray.Bucket{Index: i, Count: c}) }
	switch r := rng.IntN(20); {
	case r < 6:
		add(j-rng.Int64N(3), 1+rng.Uint64N(5))
	case r < 10:
		add(max(head, j)-b+rng.Int64N(3)-1, 1+rng.Uint64N(5)) // just in or out of the window
	case r < 14:
		for range 1 + rng.IntN(20) {
			add(j-rng.Int64N(b+3), rng.Uint64N(4))
		}
	case r < 16:
		for range 1 + rng.IntN(5) {
			add(j-b-rng.Int64N(5*b), 1+rng.Uint64N(5)) // older than the window
		}
	case r < 17:
		for i := j - b + 1; i <= j; i++ {
			add(i, 1+rng.Uint64N(3))
		}
	default:
		for range 1 + rng.IntN(3) {
			add(j+1+rng.Int64N(2*b), 1+rng.Uint64N(5)) // ahead: moves the head
		}
		add(j, 1)
	}
	return bs
}

// Flushing many counters per script call lands exactly as merging each counter on its
// own (Merge) and as the in-memory store's Reset and Merge: same Load and Count for
// every counter, over rounds whose clock moves a little, a window, or many windows, with
// shapes up to 3600 buckets, buckets older than the window, resets (alone, or before
// buckets), and a counter twice in one flush.
func TestFlushManyEqualsPerCounterMerge(t *testing.T) {
	srv, st := startStore(t)
	s := seed(t)
	t.Logf("seed %d", s)
	rng := rand.New(rand.NewPCG(s, 11))
	many := open(t, srv.URL(), Config{FlushKeys: 1 + rng.IntN(40)})
	t.Logf("FlushKeys %d", many.cfg.FlushKeys)
	mem := newMem()
	var refs []CounterRef
	for i := range 160 {
		refs = append(refs, CounterRef{Key: "c" + strconv.Itoa(i%150), Spec: flushSpecs[i%len(flushSpecs)]})
	}
	heads := make([]int64, len(refs)) // each counter's head: the newest bucket merged
	now := int64(1_700_000_000_000)
	for round := range 10 {
		switch rng.IntN(4) {
		case 0:
			now += rng.Int64N(5_000)
		case 1:
			now += 60_000 + rng.Int64N(60_000)
		case 2:
			now += 10 * 3_600_000
		}
		var deltas []Delta
		for i, r := range refs {
			for range rng.IntN(3) { // 0, 1 or 2 deltas for this counter in this flush
				bs := randomDelta(rng, r.Spec, now, heads[i])
				reset := rng.IntN(8) == 0
				if reset {
					heads[i] = 0
					if rng.IntN(2) == 0 {
						bs = nil // a reset alone
					}
				}
				for _, b := range bs {
					heads[i] = max(heads[i], b.Index)
				}
				deltas = append(deltas, Delta{Key: "m/" + r.Key, Spec: r.Spec, Buckets: bs, Reset: reset})
			}
		}
		if err := sendOnce(many, deltas); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var single []call // one call per delta, without a writer key, pipelined
		for _, d := range deltas {
			key := strings.TrimPrefix(d.Key, "m/")
			if d.Reset {
				mem.Reset(key, d.Spec, now)
			}
			mem.Merge(key, d.Spec, d.Buckets)
			d.Key = "s/" + key
			single = append(single, st.mergeCall(d))
		}
		cmds, _ := st.runAll(bg, single)
		for _, cmd := range cmds {
			if _, err := mergeReply(cmd, 1); err != nil {
				t.Fatal(err)
			}
		}
		checkSame(t, srv.Client(t), st, mem.Store, refs, now, fmt.Sprintf("round %d", round))
	}
}

// checkSame wants each counter flushed many at a time (m/), merged on its own (s/) and
// in memory to agree: same buckets (as Load reads them), same count, and a hash that
// keeps its invariant. It reads in pipelines, to keep the test quick.
func checkSame(t *testing.T, rc *redis.Client, st *Store, mem *leaparray.Store, refs []CounterRef, now int64, when string) {
	t.Helper()
	for _, prefix := range []string{"m/", "s/"} {
		pipe := rc.Pipeline()
		hashes := make([]*redis.MapStringStringCmd, len(refs))
		named := make([]CounterRef, len(refs))
		for i, r := range refs {
			hashes[i] = pipe.HGetAll(bg, counterKey(prefix+r.Key, r.Spec))
			named[i] = CounterRef{Key: prefix + r.Key, Spec: r.Spec}
		}
		if _, err := pipe.Exec(bg); err != nil {
			t.Fatal(err)
		}
		counts, err := countAll(st, named, now)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range refs {
			fields := hashes[i].Val()
			checkHash(t, prefix+r.Key, fields, r.Spec)
			got, err := windowOf(fields, r.Spec, now) // what Load answers
			if err != nil {
				t.Fatal(err)
			}
			if want := mem.Snapshot(r.Key, r.Spec, now); !(len(got) == 0 && len(want) == 0) && !slices.Equal(got, want) {
				t.Fatalf("%s: %s%s %v: Load = %v; want %v", when, prefix, r.Key, r.Spec, got, want)
			}
			if want := mem.Count(r.Key, r.Spec, now); counts[i] != want {
				t.Fatalf("%s: %s%s %v: Count = %d; want %d", when, prefix, r.Key, r.Spec, counts[i], want)
			}
		}
	}
}

// checkHash checks a counter hash's invariant: the head, the sum, and only the
// non-zero buckets in (h-B, h], summing to s.
func checkHash(t *testing.T, key string, f map[string]string, sp leaparray.Spec) {
	t.Helper()
	if len(f) == 0 {
		return
	}
	h, err1 := strconv.ParseInt(f["h"], 10, 64)
	s, err2 := strconv.ParseInt(f["s"], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: h %q, s %q; want integers", key, f["h"], f["s"])
	}
	var sum int64
	for name, v := range f {
		if name == "h" || name == "s" {
			continue
		}
		j, err1 := strconv.ParseInt(name, 10, 64)
		c, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil || j <= h-int64(sp.Buckets) || j > h || c <= 0 {
			t.Fatalf("%s: field %q = %q with head %d; want buckets in (h-B, h] with counts > 0", key, name, v, h)
		}
		sum += c
	}
	if sum != s {
		t.Fatalf("%s: s = %d; want %d, the sum of its buckets", key, s, sum)
	}
}

// Each script call carries up to FlushKeys counters and flushPairs buckets; a round
// trip carries up to FlushChunk counters. Counted by Redis (commandstats) and by the
// client (round trips).
func TestFlushManyCallsAndRoundTrips(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), Config{FlushKeys: 7})
	trips := &tripCounter{}
	st.rdb.AddHook(trips)
	sp, big := spec(10_000, 10), spec(3_600_000, 3600)
	now := int64(1_700_000_000_000)
	var deltas []Delta
	for i := range 100 {
		deltas = append(deltas, Delta{Key: "k" + strconv.Itoa(i), Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: 1}}})
	}
	for i := range 10 {
		var ring []leaparray.Bucket
		for j := big.Bucket(now) - 3599; j <= big.Bucket(now); j++ {
			ring = append(ring, leaparray.Bucket{Index: j, Count: 1})
		}
		deltas = append(deltas, Delta{Key: "big" + strconv.Itoa(i), Spec: big, Buckets: ring})
	}
	resetStats(t, srv)
	if err := sendOnce(st, deltas); err != nil {
		t.Fatal(err)
	}
	// 100 small ones in calls of 7: 14 full calls, then k98, k99 and four rings (16384
	// pairs at most); then two calls for the other six rings
	if got, want := evalshaCalls(t, srv), int64(14+1+2); got != want {
		t.Fatalf("EVALSHA calls = %d; want %d", got, want)
	}
	for _, d := range deltas[100:110] {
		if c, _ := st.Count(bg, d.Key, big, now); c != 3600 {
			t.Fatalf("%s count = %d; want 3600", d.Key, c)
		}
	}
	many := open(t, srv.URL(), Config{})
	many.rdb.AddHook(trips)
	deltas = deltas[:0]
	for i := range 5000 {
		deltas = append(deltas, Delta{Key: "n" + strconv.Itoa(i), Spec: sp, Buckets: []leaparray.Bucket{{Index: 7, Count: 1}}})
	}
	resetStats(t, srv)
	trips.n.Store(0)
	if err := sendOnce(many, deltas); err != nil {
		t.Fatal(err)
	}
	if got, want := evalshaCalls(t, srv), int64(20); got != want { // ceil(5000/256)
		t.Fatalf("EVALSHA calls for 5000 counters = %d; want %d", got, want)
	}
	if got, want := trips.n.Load(), int64(3); got != want { // ceil(5000/FlushChunk)
		t.Fatalf("round trips for 5000 counters = %d; want %d", got, want)
	}
}

// A counter that fails inside a many-counter call (its key holds a string) fails alone:
// the FlushError names only it, and the counters before and after it in the same call
// are merged.
func TestFlushManyOneKeyFails(t *testing.T) {
	srv, st := startStore(t)
	sp := spec(10_000, 10)
	srv.Do(t, "SET", counterKey("k4", sp), "x")
	var deltas []Delta
	for i := range 10 {
		deltas = append(deltas, Delta{Key: "k" + strconv.Itoa(i), Spec: sp, Buckets: []leaparray.Bucket{{Index: 5, Count: uint64(i + 1)}}})
	}
	err := sendOnce(st, deltas)
	var fe *FlushError
	if !errors.As(err, &fe) || !slices.Equal(fe.Failed, []int{4}) || !strings.Contains(err.Error(), "WRONGTYPE") ||
		!strings.Contains(err.Error(), `"k4"`) {
		t.Fatalf("send = %v; want a FlushError naming only k4 (index 4), WRONGTYPE", err)
	}
	for i, d := range deltas {
		if i == 4 {
			continue
		}
		if c, err := st.Count(bg, d.Key, sp, 5*sp.BucketMs()); err != nil || c != int64(i+1) {
			t.Fatalf("%s count = %d (%v); want %d", d.Key, c, err, i+1)
		}
	}
}

// A call whose counters Redis holds none of (a key flood's) writes each without
// reading it first: one EXISTS for the call, then an HSET and a PEXPIRE a counter. A
// counter met again in the same call, or any call with a counter Redis holds, reads as
// usual. Either way the counts are Merge's.
func TestNewCountersAreWrittenWithoutReadingEach(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), Config{FlushKeys: 16})
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	j := sp.Bucket(now)
	one := func(key string, index int64, reset bool) Delta {
		return Delta{Key: key, Spec: sp, Buckets: []leaparray.Bucket{{Index: index, Count: 1}}, Reset: reset}
	}
	send := func(ds ...Delta) {
		t.Helper()
		resetStats(t, srv)
		if err := sendOnce(st, ds); err != nil {
			t.Fatal(err)
		}
	}
	counts := func(want map[string]int64) {
		t.Helper()
		for key, w := range want {
			if c, err := st.Count(bg, key, sp, now); err != nil || c != w {
				t.Fatalf("%s: count %d, %v; want %d", key, c, err, w)
			}
		}
	}
	// All new: k0 twice (its second delta reads), a reset alone, a reset and a bucket.
	send(one("k0", j, false), one("k1", j, false), one("k0", j, false), one("k2", j, false),
		Delta{Key: "gone", Spec: sp, Reset: true}, one("r", j, true))
	if got := commandCalls(t, "hmget", srv); got != 1 {
		t.Fatalf("HMGET calls for a call of new counters = %d; want 1 (k0's second delta)", got)
	}
	if got := commandCalls(t, "exists", srv); got != 2 {
		t.Fatalf("EXISTS calls = %d; want 2 (the first counter, then the rest)", got)
	}
	counts(map[string]int64{"k0": 2, "k1": 1, "k2": 1, "gone": 0, "r": 1})
	// A new counter first, then one Redis holds: every counter reads.
	send(one("x", j, false), one("k1", j, false), one("y", j, false))
	if got := commandCalls(t, "hmget", srv); got != 3 {
		t.Fatalf("HMGET calls for a call with a counter Redis holds = %d; want 3", got)
	}
	counts(map[string]int64{"x": 1, "k1": 2, "y": 1})
	// A counter Redis holds first: one EXISTS, of it alone.
	send(one("k2", j, false), one("z", j, false))
	if got, hm := commandCalls(t, "exists", srv), commandCalls(t, "hmget", srv); got != 1 || hm != 2 {
		t.Fatalf("EXISTS, HMGET calls = %d, %d; want 1, 2", got, hm)
	}
	counts(map[string]int64{"k2": 2, "z": 1})
}
