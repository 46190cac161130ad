package hotkeys

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// check verifies the summary's structure: buckets by strictly rising count, every
// entry in the bucket it points to, the map holding exactly the entries listed.
func (s *summary) check(t *testing.T) {
	t.Helper()
	seen := 0
	var last uint64
	for b := s.min; b != nil; b = b.next {
		if b.count <= last || b.first == nil || (b.next != nil && b.next.prev != b) {
			t.Fatalf("bucket %d after %d: out of order, empty or mislinked", b.count, last)
		}
		last = b.count
		for e := b.first; e != nil; e = e.next {
			if e.b != b || s.entries[e.key] != e || (e.next != nil && e.next.prev != e) {
				t.Fatalf("entry %q mislinked", e.key)
			}
			seen++
		}
	}
	if seen != len(s.entries) || seen > s.capacity {
		t.Fatalf("%d entries listed, %d in the map, capacity %d", seen, len(s.entries), s.capacity)
	}
}

// With no more keys than its capacity the summary counts exactly.
func TestSummaryIsExactWithinCapacity(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := newSummary(50)
	want := map[string]uint64{}
	for i := 0; i < 20000; i++ {
		k := fmt.Sprintf("k%d", rng.IntN(50))
		s.add(k)
		want[k]++
	}
	s.check(t)
	s.each(func(k string, count, err uint64) {
		if count != want[k] || err != 0 {
			t.Errorf("%s: count %d (error %d), want %d exactly", k, count, err, want[k])
		}
	})
}

// Over capacity, space-saving's guarantees hold: each key kept has true ≤ count ≤
// true + error, and every key seen more than n/capacity times is kept.
func TestSummaryKeepsTheFrequentKeysWithBoundedError(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(seed, 2)), 1.2, 1, 100000)
	const capacity, n = 64, 200000
	s := newSummary(capacity)
	truth := map[string]uint64{}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d", zipf.Uint64())
		if rng.IntN(10) == 0 {
			k = fmt.Sprintf("noise%d", rng.IntN(1<<20))
		}
		s.add(k)
		truth[k]++
	}
	s.check(t)
	kept := map[string]bool{}
	s.each(func(k string, count, err uint64) {
		kept[k] = true
		if tr := truth[k]; tr > count || count > tr+err {
			t.Errorf("%s: true %d outside [count-error, count] = [%d, %d]", k, tr, count-err, count)
		}
	})
	for k, c := range truth {
		if c > n/capacity && !kept[k] {
			t.Errorf("%s seen %d times (> n/capacity = %d) but not kept", k, c, n/capacity)
		}
	}
}

// Top reports the last one or two periods: a key hot two periods ago is gone, and the
// rate is the ops over the span they cover.
func TestTopForgetsOldPeriods(t *testing.T) {
	s := New(Config{Capacity: 8, SampleEvery: 1, PeriodMs: 1000})
	now := int64(1_000_000)
	for i := 0; i < 100; i++ {
		s.Observe("old", now)
	}
	for i := 0; i < 30; i++ {
		s.Observe("mid", now+1000)
	}
	r := s.Top(10, now+1500)
	if len(r.Keys) != 2 || r.Keys[0].Key != "old" || r.Keys[0].Ops != 100 || r.Keys[1].Ops != 30 || r.SpanMs != 1500 {
		t.Fatalf("after one period: %+v; want old 100 then mid 30 over 1500 ms", r)
	}
	if got := r.Keys[0].PerSecond; got < 66 || got > 67 {
		t.Fatalf("old's rate %v; want 100 ops over 1.5 s", got)
	}
	for i := 0; i < 5; i++ {
		s.Observe("new", now+2000)
	}
	r = s.Top(10, now+2100)
	if len(r.Keys) != 2 || r.Keys[0].Key != "mid" || r.Keys[1].Key != "new" {
		t.Fatalf("two periods on: %+v; want mid and new, old forgotten", r)
	}
	if r = s.Top(10, now+10_000); len(r.Keys) != 0 {
		t.Fatalf("long idle: %+v; want no key", r)
	}
	if r = s.Top(1, now+10_000); r.SampleEvery != 1 {
		t.Fatalf("SampleEvery %d", r.SampleEvery)
	}
}

// Sampling scales the counts back: a key seen n times is reported near n.
func TestSampledCountsEstimateTheOps(t *testing.T) {
	s := New(Config{SampleEvery: 16, PeriodMs: 60_000})
	for i := 0; i < 160000; i++ {
		s.Observe("hot", 1000)
	}
	r := s.Top(1, 2000)
	if len(r.Keys) != 1 || r.Keys[0].Ops < 150000 || r.Keys[0].Ops > 170000 {
		t.Fatalf("%+v; want hot near 160000 ops", r)
	}
}

// The summary keeps its own copy of a key, never the caller's buffer.
func TestKeysAreCopied(t *testing.T) {
	s := New(Config{SampleEvery: 1})
	buf := []byte("abc")
	s.Observe(string(buf), 1) // the conversion copies; a zero-copy caller must not matter either
	key := unsafeString(buf)
	s.Observe(key, 1)
	buf[0] = 'x'
	if r := s.Top(5, 2); len(r.Keys) != 1 || r.Keys[0].Key != "abc" || r.Keys[0].Ops != 2 {
		t.Fatalf("%+v; want abc twice, unchanged by the caller's buffer", r)
	}
}

func TestConcurrentObserveAndTop(t *testing.T) {
	s := New(Config{Capacity: 16, SampleEvery: 2, PeriodMs: 5})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				s.Observe(fmt.Sprintf("k%d", (i*g)%40), int64(1000+i/100))
				if i%1000 == 0 {
					s.Top(5, int64(1000+i/100))
				}
			}
		}(g)
	}
	wg.Wait()
	s.mu.Lock()
	s.cur.check(t)
	s.prev.check(t)
	s.mu.Unlock()
}

func BenchmarkObserve(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i*i%997)
	}
	for _, every := range []uint32{1, 16} {
		b.Run(fmt.Sprintf("sample_every=%d", every), func(b *testing.B) {
			s := New(Config{SampleEvery: every})
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					s.Observe(keys[i&1023], 1000)
					i++
				}
			})
		})
	}
}
