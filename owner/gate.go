package owner

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/leapcount/leapcount/counter"
)

// gate holds the ops of partitions this node gained from a live node until that node's
// Handoff arrives, or the wait runs out.
type gate struct {
	partitions atomic.Int64 // partition count of the ring in use; keys map to partitions by it
	waiting    atomic.Int32 // len(pending): the hot path checks it without locking
	mu         sync.Mutex
	pending    map[int]*expect
	early      map[early]time.Time // Handoffs that arrived before this node saw the ring change
}

type expect struct {
	from     string
	done     chan struct{}
	deadline time.Time
}

type early struct {
	p    int
	from string
}

func (g *gate) init() {
	g.pending = map[int]*expect{}
	g.early = map[early]time.Time{}
}

// Waiting reports whether some partition waits for a handoff (ops on it may wait).
func (o *Owner) Waiting() bool { return o.gate.waiting.Load() != 0 }

// partition maps a key as package ring does: xxhash64 modulo the partition count.
func (g *gate) partition(key string) int {
	n := g.partitions.Load()
	if n <= 0 {
		return 0
	}
	return int(xxhash.Sum64String(key) % uint64(n))
}

// expect marks p as waiting for a Handoff from the node named from.
func (g *gate) expect(p int, from string, wait time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if at, ok := g.early[early{p, from}]; ok && time.Since(at) < wait {
		delete(g.early, early{p, from})
		return // already released
	}
	if old := g.pending[p]; old != nil {
		close(old.done)
	}
	g.pending[p] = &expect{from: from, done: make(chan struct{}), deadline: time.Now().Add(wait)}
	g.waiting.Store(int32(len(g.pending)))
}

// released records a Handoff of p from the node named from; it reports whether p was
// waiting for it.
func (g *gate) released(p int, from string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.pending[p]
	if e == nil || e.from != from {
		g.early[early{p, from}] = time.Now()
		g.pruneEarly()
		return false
	}
	close(e.done)
	delete(g.pending, p)
	g.waiting.Store(int32(len(g.pending)))
	return true
}

func (g *gate) pruneEarly() {
	for k, at := range g.early {
		if time.Since(at) > time.Minute {
			delete(g.early, k)
		}
	}
}

// await waits until no op's partition waits for a Handoff, each at most until its
// deadline, after which the partition is given up on and served.
func (g *gate) await(ctx context.Context, ops []counter.Op) {
	if g.waiting.Load() == 0 {
		return
	}
	for i := range ops {
		p := g.partition(ops[i].Key)
		g.mu.Lock()
		e := g.pending[p]
		g.mu.Unlock()
		if e == nil {
			continue
		}
		t := time.NewTimer(time.Until(e.deadline))
		select {
		case <-e.done:
		case <-t.C:
			g.giveUp(p, e)
		case <-ctx.Done():
		}
		t.Stop()
	}
}

func (g *gate) giveUp(p int, e *expect) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[p] == e {
		close(e.done)
		delete(g.pending, p)
		g.waiting.Store(int32(len(g.pending)))
	}
}
