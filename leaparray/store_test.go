package leaparray

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

func TestSweepForgetsIdleAndGivesMemoryBack(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 10}
	other := Spec{WindowMs: 2000, Buckets: 4}
	const n = 20000
	for i := 0; i < n; i++ {
		s.Incr(fmt.Sprint("idle-", i), sp, 1, t0)
	}
	s.Incr("live", sp, 1, t0+900)
	s.Incr("other", other, 1, t0)
	if got := s.Len(); got != n+2 {
		t.Fatalf("Len: got %d; want %d", got, n+2)
	}
	// At t0+1000 the idle counters' head bucket has left the window; "live" is in it.
	removed := 0
	for pass := 0; pass < 10000 && s.Len() > 2; pass++ {
		removed += s.Sweep(t0+1000, 1000)
	}
	if removed != n {
		t.Fatalf("removed: got %d; want %d", removed, n)
	}
	if got := s.Count("live", sp, t0+1000); got != 1 {
		t.Fatalf("live counter: got %d; want 1", got)
	}
	var held int
	for _, tb := range s.tables.cur.Load().list {
		for i := range tb.shards {
			held += cap(tb.shards[i].narrow.refs.s) + len(tb.shards[i].narrow.index.s)
		}
	}
	if held > 64*len(s.tables.cur.Load().list[0].shards)*2 {
		t.Fatalf("slots and index entries still held after the sweep: %d", held)
	}
	// Once "other" too is idle and a full pass has run, its table goes.
	for i := 0; i < 1000 && len(s.tables.cur.Load().list) > 1; i++ {
		s.Sweep(t0+3000, 1<<20)
	}
	if got := len(s.tables.cur.Load().list); got != 0 && s.Len() == 0 {
		t.Fatalf("tables left after everything was swept: %d", got)
	}
}

func TestSweepRacesWithIncr(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 10, Buckets: 1}
	var wg sync.WaitGroup
	const workers, perWorker = 4, 2000
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				s.Incr(fmt.Sprint("k", i%50), sp, 1, t0+int64(i))
			}
		}()
	}
	stop := make(chan struct{})
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		for now := int64(t0); ; now++ {
			select {
			case <-stop:
				return
			default:
				s.Sweep(now, 64)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-swept
	// Every counter written in the last bucket is still there with what was added.
	last := int64(t0 + perWorker - 1)
	for k := 0; k < 50; k++ {
		got := s.Count(fmt.Sprint("k", k), sp, last)
		if got < 0 || got > workers*(perWorker/50) {
			t.Fatalf("k%d: count %d out of range", k, got)
		}
	}
}

func TestConcurrentIncrLosesNothing(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	workers := 2 * runtime.GOMAXPROCS(0)
	const per = 5000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				// time crosses bucket boundaries but stays within one window
				s.Incr("hot", sp, 1, t0+int64(i*10))
				s.Incr(fmt.Sprint("own-", w), sp, 1, t0+int64(i*10))
			}
		}(w)
	}
	wg.Wait()
	end := int64(t0 + per*10)
	if got, want := s.Count("hot", sp, end), int64(workers*per); got != want {
		t.Fatalf("hot: got %d; want %d", got, want)
	}
	for w := 0; w < workers; w++ {
		if got := s.Count(fmt.Sprint("own-", w), sp, end); got != per {
			t.Fatalf("own-%d: got %d; want %d", w, got, per)
		}
	}
}

func TestConcurrentAllowAdmitsExactlyLimit(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	const limit, tries = 1000, 4000
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < tries/8; i++ {
				if s.Allow("k", sp, limit, 1, t0+int64(i)).Allowed {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if admitted != limit {
		t.Fatalf("admitted: got %d; want %d", admitted, limit)
	}
}

func TestLeapArrayConcurrentAdds(t *testing.T) {
	a, _ := New(Spec{WindowMs: 10_000, Buckets: 10})
	var wg sync.WaitGroup
	const workers, per = 8, 5000
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				// Goroutines run at different times within one window, so they keep
				// moving the head past each other's buckets: the Sentinel race's setting.
				a.Add(t0+int64((i+w*300)%9000), 1)
			}
		}(w)
	}
	var reads sync.WaitGroup
	reads.Add(1)
	go func() {
		defer reads.Done()
		for i := 0; i < 2000; i++ {
			if c := a.Count(t0 + 9000); c < 0 || c > workers*per {
				t.Errorf("count %d out of range", c)
				return
			}
		}
	}()
	wg.Wait()
	reads.Wait()
	if got := a.Count(t0 + 9999); got != workers*per {
		t.Fatalf("got %d; want %d", got, workers*per)
	}
}
