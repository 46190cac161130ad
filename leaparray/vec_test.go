package leaparray

import (
	"fmt"
	"runtime"
	"testing"
)

// TestVecKeepsItsElements grows a vec from the heap into a mapping and shrinks it back,
// checking its elements at each step and that it holds nothing mapped once freed.
func TestVecKeepsItsElements(t *testing.T) {
	before := MappedBytes()
	var v vec[uint64]
	check := func(step string) {
		t.Helper()
		for i, x := range v.s {
			if x != uint64(i)*3 {
				t.Fatalf("%s: element %d: got %d; want %d", step, i, x, uint64(i)*3)
			}
		}
	}
	for i := 0; i < 100_000; i++ {
		v.push(uint64(i) * 3)
	}
	check("grown")
	if !v.mapped {
		t.Errorf("a vec of %d bytes: got on the heap; want mapped", v.memBytes())
	}
	v.extend(10)
	for i := 100_000; i < len(v.s); i++ {
		if v.s[i] != 0 {
			t.Fatalf("extended element %d: got %d; want 0", i, v.s[i])
		}
		v.s[i] = uint64(i) * 3
	}
	v.truncate(50_000)
	v.realloc(60_000) // shrinks the mapping
	check("shrunk mapped")
	v.truncate(100)
	v.realloc(200) // back onto the heap
	check("shrunk onto the heap")
	if v.mapped {
		t.Errorf("a vec of %d bytes: got mapped; want on the heap", v.memBytes())
	}
	if got := MappedBytes() - before; got != 0 {
		t.Errorf("mapped after shrinking onto the heap: got %d bytes more than before; want 0", got)
	}
	v.free()
}

// TestDroppedStoreUnmaps fills a store, drops it, and checks that its mapped memory goes
// back once the collector finds it unreachable: no one else would free it.
func TestDroppedStoreUnmaps(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 10}
	for i := 0; i < 100_000; i++ {
		s.Incr(fmt.Sprintf("k:%d", i), sp, 1, t0)
	}
	ts := s.tables // what the cleanup frees; holding it does not hold the store
	if ts.mapped() == 0 {
		t.Fatalf("a store of %d counters mapped nothing", s.Len())
	}
	s = nil
	for i := 0; i < 1000 && ts.mapped() > 0; i++ {
		runtime.GC() // the cleanup runs after a collection, on its own goroutine
		runtime.Gosched()
	}
	if got := ts.mapped(); got > 0 {
		t.Errorf("mapped after the store was dropped: got %d bytes; want 0", got)
	}
}

// mappedBytes is what the slab holds mapped.
func (s *slab[C]) mappedBytes() int64 {
	var n int64
	for _, m := range []struct {
		mapped bool
		bytes  int64
	}{{s.index.mapped, s.index.memBytes()}, {s.keys.mapped, s.keys.memBytes()}, {s.refs.mapped, s.refs.memBytes()},
		{s.heads.mapped, s.heads.memBytes()}, {s.counts.mapped, s.counts.memBytes()}, {s.pend.mapped, s.pend.memBytes()}} {
		if m.mapped {
			n += m.bytes
		}
	}
	return n
}
