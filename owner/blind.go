package owner

import (
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/lockrank"
)

// blindKeys are, per partition, the keys of the counters started from empty memory
// while Redis was down ("blind": their memory lacks what Redis holds). When Redis is
// back those counters alone are dropped and reloaded: the partition's other counters
// were in memory all along and their memory is whole, even if Redis lost its data
// meanwhile (a reload of those would then read what Redis no longer has). Past
// maxBlindKeys in a partition, or maxBlindTotal in all, the whole partition is
// reloaded, so a long outage with a flood of new keys costs bounded memory.
type blindKeys struct {
	mu    lockrank.Mutex[lockrank.OwnerBlind]
	by    map[int]*blindSet
	total int // keys listed over all partitions
}

type blindSet struct {
	keys map[string]struct{}
	all  bool // every counter of the partition is to be reloaded
}

// Bounds of the keys listed (memory during a long outage with many new keys).
const (
	maxBlindKeys  = 4096
	maxBlindTotal = 1 << 16
)

// mark records key as started blind in partition p.
func (b *blindKeys) mark(p int, key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by == nil {
		b.by = map[int]*blindSet{}
	}
	s := b.by[p]
	if s == nil {
		s = &blindSet{keys: map[string]struct{}{}}
		b.by[p] = s
	}
	if s.all {
		return
	}
	if _, ok := s.keys[key]; ok {
		return
	}
	if len(s.keys) >= maxBlindKeys || b.total >= maxBlindTotal {
		b.total -= len(s.keys)
		s.all, s.keys = true, nil
		return
	}
	s.keys[key] = struct{}{}
	b.total++
}

// has reports whether key of partition p was started blind.
func (b *blindKeys) has(p int, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.by[p]
	if s == nil {
		return false
	}
	_, ok := s.keys[key]
	return s.all || ok
}

// listed reports whether key of partition p was started blind and is listed by name
// (not as one of a whole partition past the bounds).
func (b *blindKeys) listed(p int, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.by[p]
	if s == nil {
		return false
	}
	_, ok := s.keys[key]
	return ok
}

// take removes and returns partition p's blind keys (nil: none).
func (b *blindKeys) take(p int) *blindSet {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.by[p]
	if s != nil {
		b.total -= len(s.keys)
	}
	delete(b.by, p)
	return s
}

// markBlind records that key, of partition p, is decided from empty memory while
// Redis is down.
func (o *Owner) markBlind(p int, key string) {
	o.blind.mark(p, key)
	o.step(p, on(Blinded)) // after the key: who sees the flag finds the key
}

// blindOp reports whether op would be decided from memory that may lack what Redis
// holds: Redis is down, and the counter is not in memory, or its partition's memory is
// stale, or it was started from empty memory while Redis was down.
func (o *Owner) blindOp(p int, op *counter.Op, redisUp bool) bool {
	if redisUp {
		return false
	}
	if o.parts.get(p) == Stale || !o.cfg.Store.Has(op.Key, spec(op)) {
		return true
	}
	return o.startedBlind(p, op.Key)
}

// startedBlind reports whether key, of partition p, was started from empty memory while
// Redis was down (its memory lacks what Redis held of it).
func (o *Owner) startedBlind(p int, key string) bool {
	return o.parts.at(p).Blind && o.blind.has(p, key)
}
