package leaparray

import (
	"fmt"
	"runtime"
	"testing"
)

// TestSweptStoreReleasesItsMemory fills a store, sweeps every counter but one away,
// and checks that the store lets go of what it held: by its own account (Bytes), by
// the garbage collector's (the live heap falls back near where it started) and by the
// operating system's (nothing stays mapped outside the heap). The one
// left keeps the table, so its shards must give their memory back themselves. With
// WithDeltas the write-behind lists are drained in between, as a node does.
func TestSweptStoreReleasesItsMemory(t *testing.T) {
	for _, deltas := range []bool{false, true} {
		t.Run(fmt.Sprintf("deltas=%v", deltas), func(t *testing.T) {
			var opts []Option
			if deltas {
				opts = append(opts, WithDeltas())
			}
			s := NewStore(opts...)
			sp := Spec{WindowMs: 1000, Buckets: 10}
			const n = 200_000
			before := liveHeap()
			for i := 0; i < n; i++ {
				s.Incr(fmt.Sprintf("flood:%08d", i), sp, 1, t0)
			}
			s.Incr("kept", sp, 1, t0+1000)
			s.Drain(nil)
			full, fullHeap := s.Bytes(), liveHeap()
			for s.Len() > 1 {
				s.Sweep(t0+1000, 1<<20)
			}
			s.Drain(nil)
			left, leftHeap := s.Bytes(), liveHeap()
			t.Logf("store bytes %d -> %d; live heap + mapped %d -> %d (before filling: %d)", full, left, fullHeap, leftHeap, before)
			// A shard may keep up to 4 KiB of removed keys' bytes before compacting its
			// arena (slab.shrink): allow 8 KiB a shard.
			if limit := int64(len(s.tables.cur.Load().list[0].shards)) << 13; left > limit {
				t.Errorf("store bytes after sweeping all but one: got %d; want at most %d (filled: %d)", left, limit, full)
			}
			if grown := leftHeap - before; grown > (fullHeap-before)/20 {
				t.Errorf("live heap + mapped still grown by %d bytes after the sweep; want at most %d (5%% of the filled store's)", grown, (fullHeap-before)/20)
			}
			if got := s.tables.mapped(); got != 0 {
				t.Errorf("mapped after sweeping all but one: got %d bytes; want 0", got)
			}
			runtime.KeepAlive(s)
		})
	}
}

// mapped is what the store's slabs hold mapped (MappedBytes counts every store's, and
// those other tests dropped are unmapped whenever their cleanup runs).
func (s *tableSet) mapped() int64 {
	var n int64
	for _, t := range s.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			for _, sl := range []interface{ mappedBytes() int64 }{&sh.one, &sh.narrow, &sh.wide} {
				n += sl.mappedBytes()
			}
			sh.mu.Unlock()
		}
	}
	return n
}

// liveHeap is the heap in use after a full collection, and what the slabs hold mapped
// outside it.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc) + MappedBytes()
}

// What waits to be written costs a fixed few bytes a counter: a flood of new counters,
// none drained yet, costs at most 6 bytes each over the same store without deltas (the
// 4-byte mark in its pend slot, and the slots' room to grow: whole.go). Before, an
// 8-byte entry each besides: 14.6 bytes a counter here (16-byte entries: 21.0; 32-byte
// ones: 37.6).
func TestPendingFloodCostsFewBytesACounter(t *testing.T) {
	sp := Spec{WindowMs: 60_000, Buckets: 10}
	const n = 300_000
	plain, with := NewStore(), NewStore(WithDeltas())
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("flood:%08d", i)
		plain.Incr(key, sp, 1, t0)
		with.Incr(key, sp, 1, t0)
	}
	per := float64(with.Bytes()-plain.Bytes()) / n
	t.Logf("store bytes a counter: %.1f without deltas, %.1f with all pending", float64(plain.Bytes())/n, float64(with.Bytes())/n)
	if per > 6 {
		t.Fatalf("pending costs %.1f bytes a counter; want at most 6", per)
	}
}
