package fallback

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// One script call (one round trip) per counter delta: what a node pays per request when
// it answers from Redis.
func BenchmarkIncrOneScriptPerCall(b *testing.B) {
	_, st := startStore(b)
	sp := spec(60_000, 60)
	keys := benchKeys(1000)
	now := int64(1_700_000_000_000)
	i := 0
	start := time.Now()
	for b.Loop() {
		if _, err := st.Incr(bg, keys[i%len(keys)], sp, 1, now+int64(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	report(b, i, time.Since(start))
}

// The write-behind path: many counters' deltas merged per pipeline, a new batch each
// time (each call raising its writer's mark once). The counters are the same each time
// (a busy limiter's), but for new: each delta is a counter Redis does not hold yet (a
// flood of new keys).
func BenchmarkFlushDeltas(b *testing.B) {
	for _, c := range []struct {
		name    string
		buckets int
		new     bool
	}{{"1buckets", 1, false}, {"10buckets", 10, false}, {"1buckets/new", 1, true}} {
		b.Run(c.name, func(b *testing.B) {
			srv, st := startStore(b)
			sp := spec(60_000, 60)
			now := int64(1_700_000_000_000)
			deltas := make([]Delta, FlushChunk)
			for i, k := range benchKeys(len(deltas)) {
				bs := make([]leaparray.Bucket, c.buckets)
				for j := range bs {
					bs[j] = leaparray.Bucket{Index: sp.Bucket(now) - int64(c.buckets-1-j), Count: 1}
				}
				deltas[i] = Delta{Key: k, Spec: sp, Buckets: bs}
			}
			n := 0
			resetStats(b, srv)
			start := time.Now()
			for b.Loop() {
				if c.new {
					for i := range deltas {
						deltas[i].Key = "new:" + strconv.Itoa(n+i)
					}
				}
				if err := st.SendBatch(bg, st.NewBatch("bench", deltas)); err != nil {
					b.Fatal(err)
				}
				n += len(deltas)
			}
			report(b, n, time.Since(start))
			cmds, usec := scriptStats(b, srv)
			b.ReportMetric(float64(cmds)/float64(n), "redis-cmds/delta")
			b.ReportMetric(float64(usec)/float64(n), "redis-us/delta")
		})
	}
}

// scriptStats is what the scripts cost Redis since the last CONFIG RESETSTAT, from INFO
// commandstats: the commands they called (hash, key and string commands) and the
// microseconds spent in EVALSHA.
func scriptStats(b *testing.B, srv *testredis.Server) (cmds, usec int64) {
	info, ok := srv.Do(b, "INFO", "commandstats").(string)
	if !ok {
		b.Fatal("INFO commandstats: not a string")
	}
	for _, name := range []string{"get", "set", "del", "exists", "pexpire", "hget", "hmget", "hset", "hincrby", "hdel", "hlen", "hgetall"} {
		v := infoField(info, "cmdstat_"+name)
		if c, ok := strings.CutPrefix(v, "calls="); ok {
			c, _, _ = strings.Cut(c, ",")
			n, err := strconv.ParseInt(c, 10, 64)
			if err != nil {
				b.Fatalf("cmdstat_%s %q: %v", name, v, err)
			}
			cmds += n
		}
	}
	_, usec = evalshaStats(b, srv)
	return cmds, usec
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "bench:" + strconv.Itoa(i)
	}
	return keys
}

// report adds the cost per counter delta and the deltas (script calls) per second.
func report(b *testing.B, deltas int, d time.Duration) {
	if deltas == 0 {
		return
	}
	b.ReportMetric(float64(d.Nanoseconds())/float64(deltas), "ns/delta")
	b.ReportMetric(float64(deltas)/d.Seconds(), "deltas/s")
}

// The write-behind scenario: 100k incr/s over 10k counters, the owner flushing
// every 100 ms. One iteration is one simulated second: 100k incrs on random counters
// (seeded), sent
//
//	(a) one EVALSHA per incr, as a node answering every request from Redis would
//	    (pipelined 1000 per round trip, which changes the round trips, not the commands);
//	(b) coalesced per 100 ms into one delta per changed counter (≤ 10k per flush, about
//	    6.3k) and written in a batch per flush, FlushKeys counters per script call;
//	(c) the same deltas with FlushKeys 1: one script call per delta, as before.
//
// Redis counts the commands and the time it spent in them (INFO commandstats, before and
// after); the client counts the round trips. Metrics per simulated second are per second
// at 100k incr/s; ratio is (a)'s commands over (b)'s.
//
// On one server any counters share a call. In a Cluster only counters of one hash slot
// do, and each counter has its own hash tag, so 6.3k counters spread over some 5k of
// the 16384 slots: cluster3 shows what grouping by slot then saves (little).
func BenchmarkWriteBehindCommands(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		srv := testredis.Start(b)
		writeBehind(b, srv.URL(), srv)
	})
	b.Run("cluster3", func(b *testing.B) {
		nodes := testredis.StartCluster(b, 3)
		writeBehind(b, testredis.ClusterURL(nodes), nodes...)
	})
}

func writeBehind(b *testing.B, url string, srv ...*testredis.Server) {
	st := open(b, url, Config{})
	one := open(b, url, Config{FlushKeys: 1})
	trips := &tripCounter{}
	st.rdb.AddHook(trips)
	sp := spec(60_000, 60)
	keys := benchKeys(10_000)
	const incrsPerSec, flushes = 100_000, 10
	rng := rand.New(rand.NewPCG(1, 2))
	now := int64(1_700_000_000_000)
	type tally struct{ calls, usec, trips int64 }
	var a, bb, c tally
	measure := func(t *tally, f func()) {
		calls, usec := evalshaStats(b, srv...)
		tr := trips.n.Load()
		f()
		calls2, usec2 := evalshaStats(b, srv...)
		t.calls, t.usec, t.trips = t.calls+calls2-calls, t.usec+usec2-usec, t.trips+trips.n.Load()-tr
	}
	var seconds, deltas int64
	picks := make([]int, incrsPerSec)
	at := make([]int64, incrsPerSec)
	for b.Loop() {
		for i := range picks {
			picks[i] = rng.IntN(len(keys))
			at[i] = now + int64(i/(incrsPerSec/flushes))*100 + rng.Int64N(100)
		}
		measure(&a, func() { incrEach(b, st, sp, keys, picks, at) })
		per := make([][]Delta, flushes)
		for f := range per {
			lo, hi := f*incrsPerSec/flushes, (f+1)*incrsPerSec/flushes
			per[f] = coalesce(sp, keys, picks[lo:hi], at[lo:hi])
			deltas += int64(len(per[f]))
		}
		for _, x := range []struct {
			st *Store
			t  *tally
		}{{st, &bb}, {one, &c}} {
			measure(x.t, func() {
				for _, ds := range per {
					if err := x.st.SendBatch(bg, x.st.NewBatch("bench", ds)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		seconds++
		now += 1000
	}
	incrs := float64(seconds * incrsPerSec)
	for _, m := range []struct {
		name string
		t    tally
	}{{"a", a}, {"b", bb}, {"c", c}} {
		b.ReportMetric(float64(m.t.calls)/incrs, m.name+"-cmds/incr")
		b.ReportMetric(float64(m.t.calls)/float64(seconds), m.name+"-cmds/s")
		b.ReportMetric(float64(m.t.usec)/incrs, m.name+"-redis-us/incr")
	}
	b.ReportMetric(float64(bb.trips)/float64(seconds), "b-roundtrips/s")
	b.ReportMetric(float64(deltas)/float64(seconds*flushes), "deltas/flush")
	b.ReportMetric(float64(a.calls)/float64(bb.calls), "ratio-a/b")
}

// incrEach sends one incr script per pick, pipelined 1000 per round trip.
func incrEach(b *testing.B, st *Store, sp leaparray.Spec, keys []string, picks []int, at []int64) {
	calls := make([]call, 0, 1000)
	for i := 0; i < len(picks); i += cap(calls) {
		calls = calls[:0]
		for k, p := range picks[i:min(i+cap(calls), len(picks))] {
			calls = append(calls, st.incrCall(keys[p], sp, 1, at[i+k]))
		}
		cmds, _ := st.runAll(bg, calls)
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// coalesce turns one flush interval's incrs into one delta per counter, per bucket, as
// an owner's write-behind does.
func coalesce(sp leaparray.Spec, keys []string, picks []int, at []int64) []Delta {
	type kb struct {
		key    int
		bucket int64
	}
	sums := map[kb]uint64{}
	var order []kb
	for i, k := range picks {
		x := kb{k, sp.Bucket(at[i])}
		if sums[x] == 0 {
			order = append(order, x)
		}
		sums[x]++
	}
	byKey := map[int]int{}
	var out []Delta
	for _, x := range order {
		i, ok := byKey[x.key]
		if !ok {
			i = len(out)
			byKey[x.key] = i
			out = append(out, Delta{Key: keys[x.key], Spec: sp})
		}
		out[i].Buckets = append(out[i].Buckets, leaparray.Bucket{Index: x.bucket, Count: sums[x]})
	}
	return out
}

// BenchmarkFlushDeltasReplicated is what waiting for a replica (Config.WaitReplicas)
// adds to a write-behind round trip of FlushChunk busy counters: a master with one
// replica, written without and with WAIT.
func BenchmarkFlushDeltasReplicated(b *testing.B) {
	master, _ := testredis.StartReplicated(b)
	sp := spec(60_000, 60)
	now := int64(1_700_000_000_000)
	deltas := make([]Delta, FlushChunk)
	for i, k := range benchKeys(len(deltas)) {
		deltas[i] = Delta{Key: k, Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: 1}}}
	}
	for _, wait := range []int{0, 1} {
		b.Run("wait"+strconv.Itoa(wait), func(b *testing.B) {
			st := open(b, master.URL(), Config{WaitReplicas: wait, WaitTimeout: time.Second})
			for b.Loop() {
				if err := st.SendBatch(bg, st.NewBatch("bench", deltas)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// What a key flood's write-behind allocates per counter to make its batches: NewBatch
// over a drain's worth of new counters (owner.DefaultFlushBatch), one bucket each. Its
// garbage sets the collector's headroom while a flood drains (node's gcGoal), and so
// the node's peak RSS (issue 49).
func BenchmarkNewBatch(b *testing.B) {
	_, st := startStore(b)
	deltas := floodDeltas(8192)
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := 0
	for b.Loop() {
		st.NewBatch("bench", deltas)
		n += len(deltas)
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n), "B/delta")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n), "allocs/delta")
}
