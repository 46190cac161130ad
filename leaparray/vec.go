package leaparray

import (
	"sync/atomic"
	"unsafe"
)

// vec is one slab array: pointer-free elements in one block, on the Go heap while it is
// small and mapped from the operating system (mapBytes) once it reaches mapMin bytes.
//
// Mapped memory is outside the Go heap: the collector neither scans it nor counts it in
// its heap goal, so the slabs of millions of counters cost their bytes in RSS rather than
// about twice that (GOGC headroom, and the old arrays each append doubling left behind as
// garbage). A mapped vec grows with mremap, which moves page-table entries rather than
// copying and leaves nothing behind, and gives its memory back with munmap at once when
// it shrinks or is freed. BenchmarkStoreMemory (rss-bytes/counter) shows what this pays.
//
// Nothing may hold a view into a vec (a slice of it, or a string made with unsafe.String)
// across a call that may grow, shrink or free it: once unmapped, reading it would crash
// the process, not just read stale bytes.
type vec[T any] struct {
	s      []T
	mapped bool // s is a mapping of its own (freed with unmapBytes), not Go heap
}

// mapMin is the size from which a vec is mapped: one page, a mapping's granularity.
// The small arrays below it stay on the heap, so a Spec with a few counters costs no
// page per array. It is no more, because every array that grows on the heap leaves its
// old copies behind as garbage: a larger mapMin cost RSS well beyond the mapped bytes
// (BenchmarkStoreMemory, rss-bytes/counter).
const mapMin = 4 << 10

// maxMappings bounds the vecs mapped at once (each is one mapping, however large),
// leaving most of the kernel's limit (vm.max_map_count, 65530 by default) to the Go
// runtime and the rest of the process; past it, vecs stay on the heap.
const maxMappings = 16 << 10

var (
	mappedBytes atomic.Int64 // what every vec holds mapped, for tests and benchmarks
	mappings    atomic.Int64 // mapped vecs
)

// MappedBytes is the memory the package holds outside the Go heap, in every store.
func MappedBytes() int64 { return mappedBytes.Load() }

func sizeOf[T any]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// push appends x.
func (v *vec[T]) push(x T) {
	if len(v.s) == cap(v.s) {
		v.realloc(v.grownCap(len(v.s) + 1))
	}
	v.s = append(v.s, x) // within capacity: never reallocates
}

// extend appends n zero elements.
func (v *vec[T]) extend(n int) {
	l := len(v.s) + n
	if l > cap(v.s) {
		v.realloc(v.grownCap(l))
	}
	v.s = v.s[:l]
	clear(v.s[l-n:])
}

// truncate keeps the first n elements.
func (v *vec[T]) truncate(n int) { v.s = v.s[:n] }

// grownCap is the capacity to grow to for need elements: doubling on the heap, a quarter
// more once mapped (growing a mapping copies nothing, so small steps cost little, and
// leave less mapped and unused).
func (v *vec[T]) grownCap(need int) int {
	c := cap(v.s)
	if c*sizeOf[T]() < mapMin {
		return max(need, 2*c, 8)
	}
	return max(need, c+c/4)
}

// realloc gives the vec capacity c (at least its length), keeping its elements.
func (v *vec[T]) realloc(c int) {
	size := sizeOf[T]()
	n := c * size
	if n >= mapMin && pageSize%size == 0 {
		n = (n + pageSize - 1) &^ (pageSize - 1)
		if v.mapped {
			if b, ok := remapBytes(v.bytes(), n); ok {
				mappedBytes.Add(int64(len(b) - cap(v.s)*size))
				v.s = fromBytes[T](b)[:len(v.s)]
				return
			}
		} else if b, ok := mapVec(n); ok {
			s := fromBytes[T](b)[:len(v.s)]
			copy(s, v.s)
			v.free()
			v.s, v.mapped = s, true
			return
		}
	}
	s := make([]T, len(v.s), c)
	copy(s, v.s)
	v.free()
	v.s = s
}

// free gives the memory back: at once when mapped, to the collector otherwise.
func (v *vec[T]) free() {
	if v.mapped {
		b := v.bytes()
		mappedBytes.Add(-int64(len(b)))
		mappings.Add(-1)
		unmapBytes(b)
	}
	v.s, v.mapped = nil, false
}

// mapVec maps n bytes for a vec, if the process may hold one more mapping.
func mapVec(n int) ([]byte, bool) {
	if mappings.Add(1) > maxMappings {
		mappings.Add(-1)
		return nil, false
	}
	b, ok := mapBytes(n)
	if !ok {
		mappings.Add(-1)
		return nil, false
	}
	mappedBytes.Add(int64(len(b)))
	return b, true
}

// makeVec returns a vec of n zero elements and no spare capacity.
func makeVec[T any](n int) vec[T] {
	var v vec[T]
	v.realloc(n)
	v.s = v.s[:n] // zero: a fresh mapping is, and so is a fresh heap array
	return v
}

// bytes is the whole block of a mapped vec.
func (v *vec[T]) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v.s))), cap(v.s)*sizeOf[T]())
}

func fromBytes[T any](b []byte) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sizeOf[T]())
}

// memBytes is the vec's capacity in bytes.
func (v *vec[T]) memBytes() int64 { return int64(cap(v.s) * sizeOf[T]()) }
