package leaparray

import (
	"fmt"
	"sync"
	"testing"
)

// Prefetch reads a slab's index with no lock while other goroutines grow, shrink and
// free it (rehash, remove, Sweep): under -race this shows it reads nothing unguarded,
// and the counts show it changes nothing.
func TestPrefetchWhileSlabsChange(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 10}
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, k := range keys {
				s.Prefetch(k, sp)
			}
			s.Prefetch("k1", Spec{WindowMs: 7, Buckets: 7}) // a Spec the store lacks
		}
	}()
	for round := range 5 {
		now := t0 + int64(round)*10_000 // a new window each round: the old counters are idle
		for i, k := range keys {
			for range i%3 + 1 {
				s.Incr(k, sp, 1, now+int64(i%2)*100) // every other counter in two buckets
			}
		}
		for i, k := range keys {
			if got, want := s.Count(k, sp, now+100), int64(i%3+1); got != want {
				t.Fatalf("round %d: Count(%s) = %d; want %d", round, k, got, want)
			}
		}
		for _, k := range keys[:len(keys)/2] {
			s.Reset(k, sp, now) // removals shrink the slabs
		}
		s.Sweep(now+20_000, 2*len(keys)) // and the rest go idle: the slabs are freed
		if n := s.Len(); n != 0 {
			t.Fatalf("round %d: %d counters left after the sweep; want 0", round, n)
		}
	}
	close(stop)
	wg.Wait()
}
