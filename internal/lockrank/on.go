//go:build lockrank

package lockrank

import (
	"fmt"
	"sync"

	goidpkg "github.com/petermattis/goid"
)

const checking = true

// held is, by goroutine, the locks it holds, in the order it took them.
var held struct {
	mu sync.Mutex
	by map[uint64][]heldLock
}

type heldLock struct {
	lock  any
	order int
	name  string
}

// acquire checks that the calling goroutine may take lock (rank r) and records it.
func acquire(r Ranker, lock any) {
	order, name := r.Rank()
	g := goid()
	held.mu.Lock()
	for _, h := range held.by[g] {
		if h.order >= order {
			held.mu.Unlock()
			panic(fmt.Sprintf("lockrank: %s (rank %d) taken while %s (rank %d) is held: the order is inverted", name, order, h.name, h.order))
		}
	}
	held.mu.Unlock()
	record(r, lock)
}

// record records that the calling goroutine holds lock (rank r).
func record(r Ranker, lock any) {
	order, name := r.Rank()
	g := goid()
	held.mu.Lock()
	defer held.mu.Unlock()
	if held.by == nil {
		held.by = map[uint64][]heldLock{}
	}
	held.by[g] = append(held.by[g], heldLock{lock, order, name})
}

// release forgets the calling goroutine's hold of lock (the last, for a lock held
// shared twice). A lock let go by a goroutine that did not take it (allowed for
// sync's locks) is forgotten from the goroutine that holds it.
func release(lock any) {
	g := goid()
	held.mu.Lock()
	defer held.mu.Unlock()
	if forget(g, lock) {
		return
	}
	for other := range held.by {
		if forget(other, lock) {
			return
		}
	}
}

func forget(g uint64, lock any) bool {
	hs := held.by[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].lock == lock {
			hs = append(hs[:i], hs[i+1:]...)
			if len(hs) == 0 {
				delete(held.by, g)
			} else {
				held.by[g] = hs
			}
			return true
		}
	}
	return false
}

// goid is the calling goroutine's id. goid.Get reads it from the runtime's goroutine
// structure; runtime.Stack, which prints a stack to parse it, made the simulation five
// times slower.
func goid() uint64 { return uint64(goidpkg.Get()) }
