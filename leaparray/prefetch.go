package leaparray

import (
	"sync/atomic"
	"unsafe"
)

// indexHint is where a slab's index is, published for Prefetch, which reads it without
// the shard's lock. Base and mask are stored apart, so a reader racing a rehash may pair
// one index's base with the other's mask; the address it makes is then wrong, which a
// prefetch tolerates: it is a hint that never faults, not a load.
type indexHint struct {
	base atomic.Uintptr // &index[0], 0 when there is no index
	mask atomic.Uint64  // len(index)-1
}

// publish records the slab's index after it changed (under the shard's lock).
func (ih *indexHint) publish(index []uint64) {
	if len(index) == 0 {
		ih.base.Store(0)
		return
	}
	ih.mask.Store(uint64(len(index) - 1))
	ih.base.Store(uintptr(unsafe.Pointer(&index[0])))
}

// prefetch asks for the cache line of the index entry where a lookup of hash h begins.
func (ih *indexHint) prefetch(h uint64) {
	if base := ih.base.Load(); base != 0 {
		prefetch(base + uintptr(home(h>>32, ih.mask.Load())*8))
	}
}

// Prefetch asks the CPU to bring the index entries where key's counter would be looked
// up into its caches, and returns without waiting for them. Calling it for each op of a
// batch before deciding them lets the cache misses of the batch's lookups overlap:
// each lookup misses the index, the counter's key and its head in turn, and a shard's
// lock, a locked instruction, keeps the misses of one op from overlapping the next's.
// It takes no lock and changes nothing; a key the store does not hold costs a hint.
//
// The prefetch instruction is written by hand (prefetch_amd64.s, prefetch_arm64.s): Go
// offers none. A pipelined batch's Incrs are faster with Prefetch first
// (BenchmarkStoreIncrBatch).
func (s *Store) Prefetch(key string, sp Spec) {
	t := s.tables.get(sp)
	if t == nil {
		return
	}
	h := hashKey(key)
	sh := t.shard(h)
	sh.one.hint.prefetch(h)
	sh.narrow.hint.prefetch(h)
	sh.wide.hint.prefetch(h)
}
