package owner

import "sync"

// blindKeys are, per partition, the keys of the counters started from empty memory
// while Redis was down ("blind": their memory lacks what Redis holds). When Redis is
// back those counters alone are dropped and reloaded: the partition's other counters
// were in memory all along and their memory is whole, even if Redis lost its data
// meanwhile (a reload of those would then read what Redis no longer has). Past
// maxBlindKeys in a partition, or when any of its memory may be stale (a lapse), the
// whole partition is reloaded.
type blindKeys struct {
	mu sync.Mutex
	by map[int]*blindSet
}

type blindSet struct {
	keys map[string]struct{}
	all  bool // every counter of the partition is to be reloaded
}

// maxBlindKeys bounds the keys listed per partition (memory during a long outage with
// many new keys); past it the whole partition is reloaded.
const maxBlindKeys = 4096

// mark records key as started blind in partition p (every key, when key is "" and
// all is set).
func (b *blindKeys) mark(p int, key string, all bool) {
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
	if all || len(s.keys) >= maxBlindKeys {
		s.all, s.keys = true, nil
	}
	if !s.all {
		s.keys[key] = struct{}{}
	}
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

// take removes and returns partition p's blind keys (nil: none).
func (b *blindKeys) take(p int) *blindSet {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.by[p]
	delete(b.by, p)
	return s
}

// markBlind records that key, of partition p, is decided from empty memory while
// Redis is down (all: that p's whole memory may lack what Redis holds).
func (o *Owner) markBlind(p int, key string, all bool) {
	o.blindKeys.mark(p, key, all)
	o.parts.blind[p].Store(true) // after the key: who sees the flag finds the key
}
