package leaparray

import (
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// A slab holds one shard's counters of one Spec in flat, pointer-free arrays, so that
// ten million counters are a few dozen large blocks, mapped outside the Go heap (vec.go),
// that the garbage collector never sees, and no counter costs a heap object or a
// pointer. Written by hand rather than as a map[string]*ring because the map costs far
// more bytes per counter, and one scanned object each (BenchmarkStoreMemory).
//
// Counter i of the slab (its slot) is refs[i] (its key bytes in the arena), heads[i]
// and counts[i*b : (i+1)*b]. Slots are dense: removing a counter moves the last one
// into its place. The index is an open-addressing hash table with linear probing; an
// entry is fingerprint<<32 | slot+1, and 0 is empty.
type slab[C count] struct {
	b       int // buckets per counter
	index   vec[uint64]
	hint    indexHint // where index is, for Store.Prefetch
	keys    vec[byte] // arena of key bytes
	garbage int       // arena bytes that belong to removed counters
	refs    vec[keyRef]
	heads   vec[head]
	counts  vec[C]

	deltas bool               // WithDeltas: pend and dl are kept
	pend   vec[uint32]        // per slot, with deltas: 1 + index into dl, 0 when clean
	dl     vec[pendingDelta]  // see delta.go
	more   map[int32][]Bucket // by slot: the buckets pending beyond its entry's first
	// pendBase is the bucket index dl's first buckets are kept relative to: the bucket
	// of the first add since dl was last empty.
	pendBase int64
	fresh    int // every counter marked pending whole (whole.go) is at this slot or above
	whole    int // how many are
}

type keyRef struct{ off, len uint32 }

const minIndex = 8

func (s *slab[C]) key(i int) string {
	r := s.refs.s[i]
	return string(s.keys.s[r.off : r.off+r.len])
}

// keyHash is hashKey of slot i's key, read in place: no copy of the key.
func (s *slab[C]) keyHash(i int) uint64 {
	r := s.refs.s[i]
	return xxhash.Sum64(s.keys.s[r.off : r.off+r.len])
}

// keyView is slot i's key without a copy: valid only until the slab changes (while the
// shard's lock is held and nothing is added or removed). The arena may be mapped memory
// that a change unmaps: a view kept past that crashes when read.
func (s *slab[C]) keyView(i int) string {
	r := s.refs.s[i]
	return unsafe.String(unsafe.SliceData(s.keys.s[r.off:]), int(r.len))
}

func (s *slab[C]) ring(i int) (*head, []C) {
	return &s.heads.s[i], s.counts.s[i*s.b : (i+1)*s.b : (i+1)*s.b]
}

// appendBuckets appends slot i's non-zero buckets, oldest first.
func (s *slab[C]) appendBuckets(dst []Bucket, i int) []Bucket {
	if s.b == 0 { // the one slab: the head bucket holds the whole count
		if hd := &s.heads.s[i]; hd.sum != 0 {
			dst = append(dst, Bucket{Index: hd.bucket, Count: hd.sum})
		}
		return dst
	}
	hd, counts := s.ring(i)
	return appendBuckets(dst, hd, counts)
}

// find returns the slot of key (hash h), or -1.
func (s *slab[C]) find(key string, h uint64) int {
	index := s.index.s
	if len(index) == 0 {
		return -1
	}
	mask := uint64(len(index) - 1)
	fp := h >> 32
	for i := home(fp, mask); ; i = (i + 1) & mask {
		e := index[i]
		if e == 0 {
			return -1
		}
		if e>>32 == fp {
			slot := int(uint32(e)) - 1
			s.prefetchRing(slot)
			r := s.refs.s[slot]
			// The conversion in a comparison does not allocate.
			if string(s.keys.s[r.off:r.off+r.len]) == key {
				return slot
			}
		}
	}
}

// prefetchRing asks for slot's head, counts and pending mark before its key is read and
// compared: the key's place (refs), the key and the head are three cache misses in a row
// otherwise (BenchmarkStoreIncrBatch).
func (s *slab[C]) prefetchRing(slot int) {
	if slot < len(s.heads.s) {
		prefetch(uintptr(unsafe.Pointer(&s.heads.s[slot])))
	}
	if i := slot * s.b; s.b > 0 && i < len(s.counts.s) {
		prefetch(uintptr(unsafe.Pointer(&s.counts.s[i])))
	}
	if slot < len(s.pend.s) { // with deltas: an add marks it
		prefetch(uintptr(unsafe.Pointer(&s.pend.s[slot])))
	}
}

// insert adds an empty counter for key (which must be absent) with its head at bucket
// j, and returns its slot.
func (s *slab[C]) insert(key string, h uint64, j int64) int {
	if (len(s.refs.s)+1)*4 > len(s.index.s)*3 {
		s.rehash(max(minIndex, len(s.index.s)*2))
	}
	slot := len(s.refs.s)
	s.refs.push(keyRef{off: uint32(len(s.keys.s)), len: uint32(len(key))})
	off := len(s.keys.s)
	s.keys.extend(len(key))
	copy(s.keys.s[off:], key)
	s.heads.push(head{bucket: j})
	s.counts.extend(s.b)
	if s.deltas {
		s.pend.push(0)
	}
	s.place(h, slot)
	return slot
}

// place writes slot's index entry at the first free position of h's probe sequence.
func (s *slab[C]) place(h uint64, slot int) {
	index := s.index.s
	mask := uint64(len(index) - 1)
	i := home(h>>32, mask)
	for index[i] != 0 {
		i = (i + 1) & mask
	}
	index[i] = h>>32<<32 | uint64(slot+1)
}

// rehash rebuilds the index with n entries (a power of two) from the old one's entries:
// their fingerprints place them, no key is read.
func (s *slab[C]) rehash(n int) {
	old := s.index
	s.index = makeVec[uint64](n)
	for _, e := range old.s {
		if e != 0 {
			s.place(e, int(uint32(e))-1)
		}
	}
	s.hint.publish(s.index.s)
	old.free()
}

// home is the first place an index entry of fingerprint fp (its key's hash's high 32
// bits) is looked for. It is made from the fingerprint alone, so that moving entries
// (unindex, rehash) reads no key to hash it again: that makes moving counters into
// rings faster (the second pass of BenchmarkStoreMemory/touches=10, shard.unfold). The
// shard bits of the hash (table.shard) are constant within a slab, and the multiply
// spreads the others.
func home(fp, mask uint64) uint64 { return (fp * 0x9E3779B97F4A7C15) >> 32 & mask }

// remove deletes the counter in slot, moving the last counter into its place.
func (s *slab[C]) remove(slot int, h uint64) {
	s.unindex(h, slot)
	s.dropPending(slot)
	s.garbage += int(s.refs.s[slot].len)
	last := len(s.refs.s) - 1
	if slot != last {
		lh := s.keyHash(last)
		s.unindex(lh, last)
		s.refs.s[slot] = s.refs.s[last]
		s.heads.s[slot] = s.heads.s[last]
		copy(s.counts.s[slot*s.b:(slot+1)*s.b], s.counts.s[last*s.b:])
		s.movePending(last, slot)
		s.place(lh, slot)
	}
	if s.deltas {
		s.pend.truncate(last)
		s.fresh = min(s.fresh, last)
	}
	s.refs.truncate(last)
	s.heads.truncate(last)
	s.counts.truncate(last * s.b)
	s.shrink()
}

// unindex removes slot's entry from the index by backward-shift deletion, which keeps
// every probe sequence unbroken without tombstones.
func (s *slab[C]) unindex(h uint64, slot int) {
	index := s.index.s
	mask := uint64(len(index) - 1)
	want := uint64(slot + 1)
	i := home(h>>32, mask)
	for uint32(index[i]) != uint32(want) {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; index[j] != 0; j = (j + 1) & mask {
		hm := home(index[j]>>32, mask)
		// Move entry j back into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (hm <= i || hm > j)) || (j < i && hm <= i && hm > j) {
			index[i] = index[j]
			i = j
		}
	}
	index[i] = 0
}

// shrink gives memory back when the live set has fallen well below what is held, so
// memory follows the live set.
func (s *slab[C]) shrink() {
	n := len(s.refs.s)
	if len(s.index.s) > minIndex && n*16 < len(s.index.s)*3 {
		s.rehash(max(minIndex, nextPow2(n*2)))
	}
	if cap(s.refs.s) > 64 && n*4 < cap(s.refs.s) {
		s.refs.realloc(n * 2)
		s.heads.realloc(n * 2)
		s.counts.realloc(n * 2 * s.b)
		if s.deltas {
			s.pend.realloc(n * 2)
		}
	}
	if s.garbage > 4096 && s.garbage*2 > len(s.keys.s) {
		s.compactKeys()
	}
}

// free empties the slab and gives its memory back.
func (s *slab[C]) free() {
	s.index.free()
	s.hint.publish(nil)
	s.keys.free()
	s.refs.free()
	s.heads.free()
	s.counts.free()
	s.pend.free()
	s.dl.free()
	s.more, s.garbage = nil, 0
	s.fresh, s.whole = 0, 0
}

// compactKeys copies the live keys into a new arena.
func (s *slab[C]) compactKeys() {
	keys := makeVec[byte](len(s.keys.s) - s.garbage)
	off := 0
	for i, r := range s.refs.s {
		s.refs.s[i].off = uint32(off)
		off += copy(keys.s[off:], s.keys.s[r.off:r.off+r.len])
	}
	s.keys.free()
	s.keys, s.garbage = keys, 0
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
