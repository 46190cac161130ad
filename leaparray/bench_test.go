package leaparray

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
)

var sink int64

// The clock advances 1 ms every 64 ops, so the adds cross bucket boundaries now and
// then, as in production.
func BenchmarkLeapArrayAdd(b *testing.B) {
	a, _ := New(Spec{WindowMs: 10_000, Buckets: 10})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink = a.Add(t0+int64(i>>6), 1)
	}
}

// Count at the head bucket: the running sum.
func BenchmarkLeapArrayCount(b *testing.B) {
	a := filledLeapArray()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink = a.Count(t0 + 9_999)
	}
}

// Count half a window after the head: five buckets are subtracted one by one.
func BenchmarkLeapArrayCountAfterHead(b *testing.B) {
	a := filledLeapArray()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink = a.Count(t0 + 14_999)
	}
}

func filledLeapArray() *LeapArray {
	a, _ := New(Spec{WindowMs: 10_000, Buckets: 10})
	for j := int64(0); j < 10; j++ {
		a.Add(t0+j*1000, j+1)
	}
	return a
}

// Each goroutine adds to its own counter: this should scale with cores.
func BenchmarkLeapArrayAddParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		a, _ := New(Spec{WindowMs: 10_000, Buckets: 10})
		i := 0
		for pb.Next() {
			a.Add(t0+int64(i>>6), 1)
			i++
		}
	})
}

func BenchmarkStoreIncr(b *testing.B) {
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	for _, n := range []int{1000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s, keys := NewStore(), makeKeys(n)
			for _, k := range keys {
				s.Incr(k, sp, 1, t0)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sink = s.Incr(keys[i%n], sp, 1, t0+int64(i>>10))
			}
		})
	}
}

// TryIncr on a bounded store far from full: what a node does for every incr.
func BenchmarkStoreTryIncr(b *testing.B) {
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	for _, n := range []int{1000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s, keys := NewStore(WithBounds(Bounds{MaxUnits: 1 << 40, MaxShapes: 256})), makeKeys(n)
			for _, k := range keys {
				s.Incr(k, sp, 1, t0)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sink, _ = s.TryIncr(keys[i%n], sp, 1, t0+int64(i>>10))
			}
		})
	}
}

// A new key refused by a store full of live counters: what a flood costs each key.
func BenchmarkStoreTryIncrFull(b *testing.B) {
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	s := NewStore(WithBounds(Bounds{MaxUnits: 100_000}))
	for _, k := range makeKeys(100_000) {
		s.Incr(k, sp, 1, t0)
	}
	keys := makeKeys(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.TryIncr("new"+keys[i], sp, 1, t0+int64(i>>10)); err == nil {
			b.Fatal("a full store admitted a new key")
		}
	}
}

func BenchmarkStoreIncrParallel(b *testing.B) {
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	s, keys := NewStore(), makeKeys(100_000)
	for _, k := range keys {
		s.Incr(k, sp, 1, t0)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			s.Incr(keys[i%len(keys)], sp, 1, t0)
			i++
		}
	})
}

func BenchmarkStoreAllow(b *testing.B) {
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	s, keys := NewStore(), makeKeys(1000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Allow(keys[i%len(keys)], sp, 1<<40, 1, t0+int64(i>>10))
	}
}

// BenchmarkStoreMemory reports what one live counter costs at 1M counters (60s / 10
// buckets), beyond its key's own bytes, touched once or in every bucket: bytes/counter
// is the live heap and the slabs' mapped memory (vec.go) together, rss-bytes/counter
// the process's resident memory growth (garbage and the collector's headroom included),
// and heap-objects what the collector has to track.
func BenchmarkStoreMemory(b *testing.B) {
	const n = 1_000_000
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	keys := makeKeys(n)
	keyBytes := 0
	for _, k := range keys {
		keyBytes += len(k)
	}
	for _, touches := range []int{1, sp.Buckets} {
		b.Run(fmt.Sprintf("touches=%d", touches), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				mapped, rss := MappedBytes(), residentBytes()
				s := NewStore()
				for t := 0; t < touches; t++ {
					for j, k := range keys {
						s.Incr(k, sp, 1, t0+int64(t)*sp.BucketMs()+int64(j%1000))
					}
				}
				rss = residentBytes() - rss
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
				mapped = MappedBytes() - mapped
				b.ReportMetric(float64(heap+mapped-int64(keyBytes))/n, "bytes/counter")
				b.ReportMetric(float64(heap)/n, "heap-bytes/counter")
				b.ReportMetric(float64(rss)/n, "rss-bytes/counter")
				b.ReportMetric(float64(int64(after.HeapObjects)-int64(before.HeapObjects)), "heap-objects")
				s.tables.free() // now, not in a later measurement's collection
			}
		})
	}
}

// residentBytes is the process's resident memory (VmRSS), or 0 where /proc does not
// tell it.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, rss int64
	if _, err := fmt.Sscan(string(b), &size, &rss); err != nil {
		return 0
	}
	return rss * int64(os.Getpagesize())
}

func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%08d", i)
	}
	return keys
}

// Incr on counters that have all left the one-bucket form (each touched in two
// buckets), in random order: the steady state of a busy limiter, where every lookup
// misses the caches and is found in a ring.
func BenchmarkStoreIncrRinged(b *testing.B) { benchIncrRandom(b, 2) }

// Incr on counters still in the one-bucket form (each touched in one bucket only), in
// random order: most counters of a limiter keyed by client, each seen once or twice a
// window, where every lookup misses the caches.
func BenchmarkStoreIncrOneBucket(b *testing.B) { benchIncrRandom(b, 1) }

// benchIncrRandom times Incr, in random order, on counters each first touched in the
// given number of buckets, at the newest of them.
func benchIncrRandom(b *testing.B, buckets int) {
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	now := t0 + int64(buckets-1)*sp.BucketMs()
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s, keys := NewStore(), makeKeys(n)
			for _, k := range keys {
				for j := range buckets {
					s.Incr(k, sp, 1, t0+int64(j)*sp.BucketMs())
				}
			}
			order := rand.New(rand.NewPCG(1, 2)).Perm(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sink = s.Incr(keys[order[i%n]], sp, 1, now)
			}
		})
	}
}

// Incr in batches of 16 counters in random order (ringed, 100k), as a pipeline or a
// forwarded frame is decided, with and without Prefetch for the batch first: what
// counter.Local.Do gains by asking for the batch's index entries before deciding it.
// Each batch's keys are copied side by side, in order, as a connection's read buffer
// holds them: reading them misses no cache, so the store's misses are what is timed.
func BenchmarkStoreIncrBatch(b *testing.B) {
	const n, batch = 100_000, 16
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	now := t0 + sp.BucketMs()
	s, keys := NewStore(), makeKeys(n)
	for _, k := range keys {
		s.Incr(k, sp, 1, t0)
		s.Incr(k, sp, 1, now)
	}
	batches := make([][batch]string, n/batch)
	for i, k := range rand.New(rand.NewPCG(1, 2)).Perm(n / batch * batch) {
		batches[i/batch][i%batch] = keys[k]
	}
	for i := range batches {
		buf := []byte{}
		for _, k := range batches[i] {
			buf = append(buf, k...)
		}
		for j, k := range batches[i] {
			batches[i][j], buf = string(buf[:len(k)]), buf[len(k):]
		}
	}
	for _, pre := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", pre), func(b *testing.B) {
			for i := 0; i < b.N; i += batch {
				ks := &batches[i/batch%len(batches)]
				if pre {
					for _, k := range ks {
						s.Prefetch(k, sp)
					}
				}
				for _, k := range ks {
					sink = s.Incr(k, sp, 1, now)
				}
			}
		})
	}
}

// Incr with deltas kept (a node with --redis) on 1M counters in random order, each
// drained once per 100k incrs in parts of 8192 (owner's FlushBatch), as write-behind
// does under a flood: the cost of keeping and draining what waits.
func BenchmarkStoreIncrWithDeltas(b *testing.B) {
	const n, every, part = 1_000_000, 100_000, 8192
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	s, keys := NewStore(WithDeltas()), makeKeys(n)
	for _, k := range keys {
		s.Incr(k, sp, 1, t0)
	}
	s.Drain(nil)
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	var buf []Delta
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sink = s.Incr(keys[order[i%n]], sp, 1, t0)
		if i%every == every-1 {
			for c, done := (DrainCursor{}), false; !done; {
				buf, done = s.DrainSome(&c, buf[:0], part)
			}
		}
	}
}
