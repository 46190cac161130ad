package fallback

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// LoadMany reads what Load reads, counter by counter, in one pipeline: counters known,
// unknown and of another spec; with Redis gone every one fails as unavailable.
func TestLoadManyMatchesLoad(t *testing.T) {
	srv, st := startStore(t)
	sp := leaparray.Spec{WindowMs: 60_000, Buckets: 10}
	const now = 1_700_000_000_000
	var refs []CounterRef
	for i := 0; i < 50; i++ {
		k := fmt.Sprintf("lm:%d", i)
		refs = append(refs, CounterRef{Key: k, Spec: sp})
		if i%3 == 0 {
			continue // unknown
		}
		for j := 0; j < i%7+1; j++ {
			if _, err := st.Incr(bg, k, sp, int64(i+j), now-int64(j)*6_000); err != nil {
				t.Fatal(err)
			}
		}
	}
	refs = append(refs, CounterRef{Key: "lm:1", Spec: leaparray.Spec{WindowMs: 1_000, Buckets: 10}})
	got := st.LoadMany(bg, refs, now)
	for i, r := range refs {
		want, err := st.Load(bg, r.Key, r.Spec, now)
		if err != nil || got[i].Err != nil || !reflect.DeepEqual(got[i].Buckets, want) {
			t.Fatalf("%s: LoadMany got %v, %v; Load got %v, %v", r.Key, got[i].Buckets, got[i].Err, want, err)
		}
	}
	srv.Stop()
	for _, l := range st.LoadMany(bg, refs[:3], now) {
		if !errors.Is(l.Err, counter.ErrUnavailable) {
			t.Fatalf("with Redis gone: got %v; want ErrUnavailable", l.Err)
		}
	}
}

// Concurrent LoadMany calls, coalesced into shared pipelines, each get their own
// counters' buckets, cut at their own now.
func TestConcurrentLoadManyGetTheirOwn(t *testing.T) {
	_, st := startStore(t)
	sp := leaparray.Spec{WindowMs: 60_000, Buckets: 10}
	const now = 1_700_000_000_000
	for i := range 40 {
		for j := range i%5 + 1 {
			if _, err := st.Incr(bg, fmt.Sprintf("cl:%d", i), sp, 1, now-int64(j)*6_000); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := CounterRef{Key: fmt.Sprintf("cl:%d", i), Spec: sp}
			at := now + int64(i%3)*12_000 // later calls see fewer buckets in the window
			for range 20 {
				got := st.LoadMany(bg, []CounterRef{ref, {Key: "cl:none", Spec: sp}}, at)
				want, err := st.Load(bg, ref.Key, ref.Spec, at)
				if err != nil || got[0].Err != nil || got[1].Err != nil || got[1].Buckets != nil || !reflect.DeepEqual(got[0].Buckets, want) {
					errs <- fmt.Errorf("%s at %d: LoadMany got %v, %v, %v; Load got %v, %v", ref.Key, at, got[0].Buckets, got[0].Err, got[1], want, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkLoadManyConcurrent is 50 goroutines loading one new counter each, as
// parked connections do under a flood of new keys: through LoadMany (coalesced into
// shared pipelines) and one HGETALL each (Load), in the same run.
func BenchmarkLoadManyConcurrent(b *testing.B) {
	_, st := startStore(b)
	sp := leaparray.Spec{WindowMs: 60_000, Buckets: 10}
	for _, name := range []string{"coalesced", "one-each"} {
		b.Run(name, func(b *testing.B) {
			var n atomic.Int64
			b.SetParallelism(25) // 50 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := fmt.Sprintf("bl:%d", n.Add(1))
					var err error
					if name == "coalesced" {
						err = st.LoadMany(bg, []CounterRef{{Key: key, Spec: sp}}, 1_700_000_000_000)[0].Err
					} else {
						_, err = st.Load(bg, key, sp, 1_700_000_000_000)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
