package leaparray

import (
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// A slab holds one shard's counters of one Spec in flat, pointer-free arrays, so that
// ten million counters are a few dozen large allocations the garbage collector never
// has to scan, and no counter costs a heap object or a pointer. Written by hand rather
// than as a map[string]*ring because BenchmarkStoreMemory showed the map costs about
// twice the bytes per counter and one scanned object each.
//
// Counter i of the slab (its slot) is refs[i] (its key bytes in the arena), heads[i]
// and counts[i*b : (i+1)*b]. Slots are dense: removing a counter moves the last one
// into its place. The index is an open-addressing hash table with linear probing; an
// entry is fingerprint<<32 | slot+1, and 0 is empty.
type slab[C count] struct {
	b       int // buckets per counter
	index   []uint64
	keys    []byte // arena of key bytes
	garbage int    // arena bytes that belong to removed counters
	refs    []keyRef
	heads   []head
	counts  []C

	pend []uint32       // per slot, with WithDeltas: 1 + index into dl, 0 when clean; nil otherwise
	dl   []pendingDelta // see delta.go
}

type keyRef struct{ off, len uint32 }

const minIndex = 8

func (s *slab[C]) key(i int) string {
	r := s.refs[i]
	return string(s.keys[r.off : r.off+r.len])
}

// keyHash is hashKey of slot i's key, read in place: no copy of the key.
func (s *slab[C]) keyHash(i int) uint64 {
	r := s.refs[i]
	return xxhash.Sum64(s.keys[r.off : r.off+r.len])
}

// keyView is slot i's key without a copy: valid only until the slab changes (while the
// shard's lock is held and nothing is added or removed).
func (s *slab[C]) keyView(i int) string {
	r := s.refs[i]
	return unsafe.String(unsafe.SliceData(s.keys[r.off:]), int(r.len))
}

func (s *slab[C]) ring(i int) (*head, []C) {
	return &s.heads[i], s.counts[i*s.b : (i+1)*s.b : (i+1)*s.b]
}

// find returns the slot of key (hash h), or -1.
func (s *slab[C]) find(key string, h uint64) int {
	if len(s.index) == 0 {
		return -1
	}
	mask := uint64(len(s.index) - 1)
	fp := h >> 32
	for i := h & mask; ; i = (i + 1) & mask {
		e := s.index[i]
		if e == 0 {
			return -1
		}
		if e>>32 == fp {
			slot := int(uint32(e)) - 1
			r := s.refs[slot]
			// The conversion in a comparison does not allocate.
			if string(s.keys[r.off:r.off+r.len]) == key {
				return slot
			}
		}
	}
}

// insert adds an empty counter for key (which must be absent) with its head at bucket
// j, and returns its slot.
func (s *slab[C]) insert(key string, h uint64, j int64) int {
	if (len(s.refs)+1)*4 > len(s.index)*3 {
		s.rehash(max(minIndex, len(s.index)*2))
	}
	slot := len(s.refs)
	s.refs = append(s.refs, keyRef{off: uint32(len(s.keys)), len: uint32(len(key))})
	s.keys = append(s.keys, key...)
	s.heads = append(s.heads, head{bucket: j})
	s.counts = append(s.counts, make([]C, s.b)...)
	if s.pend != nil {
		s.pend = append(s.pend, 0)
	}
	s.place(h, slot)
	return slot
}

// place writes slot's index entry at the first free position of h's probe sequence.
func (s *slab[C]) place(h uint64, slot int) {
	mask := uint64(len(s.index) - 1)
	i := h & mask
	for s.index[i] != 0 {
		i = (i + 1) & mask
	}
	s.index[i] = h>>32<<32 | uint64(slot+1)
}

// rehash rebuilds the index with n entries (a power of two), hashing the keys again.
func (s *slab[C]) rehash(n int) {
	s.index = make([]uint64, n)
	for slot := range s.refs {
		s.place(s.keyHash(slot), slot)
	}
}

// remove deletes the counter in slot, moving the last counter into its place.
func (s *slab[C]) remove(slot int, h uint64) {
	s.unindex(h, slot)
	s.takePending(slot)
	s.garbage += int(s.refs[slot].len)
	last := len(s.refs) - 1
	if slot != last {
		lh := s.keyHash(last)
		s.unindex(lh, last)
		s.refs[slot] = s.refs[last]
		s.heads[slot] = s.heads[last]
		copy(s.counts[slot*s.b:(slot+1)*s.b], s.counts[last*s.b:])
		s.movePending(last, slot)
		s.place(lh, slot)
	}
	if s.pend != nil {
		s.pend = s.pend[:last]
	}
	s.refs = s.refs[:last]
	s.heads = s.heads[:last]
	s.counts = s.counts[:last*s.b]
	s.shrink()
}

// unindex removes slot's entry from the index by backward-shift deletion, which keeps
// every probe sequence unbroken without tombstones.
func (s *slab[C]) unindex(h uint64, slot int) {
	mask := uint64(len(s.index) - 1)
	want := uint64(slot + 1)
	i := h & mask
	for uint32(s.index[i]) != uint32(want) {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; s.index[j] != 0; j = (j + 1) & mask {
		home := s.keyHash(int(uint32(s.index[j]))-1) & mask
		// Move entry j back into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			s.index[i] = s.index[j]
			i = j
		}
	}
	s.index[i] = 0
}

// shrink gives memory back when the live set has fallen well below what is held, so
// memory follows the live set.
func (s *slab[C]) shrink() {
	n := len(s.refs)
	if len(s.index) > minIndex && n*16 < len(s.index)*3 {
		s.rehash(max(minIndex, nextPow2(n*2)))
	}
	if cap(s.refs) > 64 && n*4 < cap(s.refs) {
		s.refs = append(make([]keyRef, 0, n*2), s.refs...)
		s.heads = append(make([]head, 0, n*2), s.heads...)
		s.counts = append(make([]C, 0, n*2*s.b), s.counts...)
		if s.pend != nil {
			s.pend = append(make([]uint32, 0, n*2), s.pend...)
		}
	}
	if s.garbage > 4096 && s.garbage*2 > len(s.keys) {
		s.compactKeys()
	}
}

// compactKeys copies the live keys into a new arena.
func (s *slab[C]) compactKeys() {
	keys := make([]byte, 0, len(s.keys)-s.garbage)
	for i, r := range s.refs {
		s.refs[i].off = uint32(len(keys))
		keys = append(keys, s.keys[r.off:r.off+r.len]...)
	}
	s.keys, s.garbage = keys, 0
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
