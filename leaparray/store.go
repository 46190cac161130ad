package leaparray

import (
	"sync"

	"github.com/cespare/xxhash/v2"
)

// INTERIM: a simple map-of-rings store with the final API; replaced by the slab store.

// Store is a keyed set of counters, safe for concurrent use. A counter is named by its
// key and Spec. Each operation on one counter is atomic.
type Store struct {
	shards []storeShard
}

type ckey struct {
	key  string
	spec Spec
}

type storeShard struct {
	mu sync.Mutex
	m  map[ckey]*LeapArray
}

// NewStore returns an empty store.
func NewStore() *Store {
	s := &Store{shards: make([]storeShard, 256)}
	for i := range s.shards {
		s.shards[i].m = make(map[ckey]*LeapArray)
	}
	return s
}

func (s *Store) shard(key string) *storeShard {
	return &s.shards[xxhash.Sum64String(key)%uint64(len(s.shards))]
}

// Incr adds n at time now and returns the count afterwards.
func (s *Store) Incr(key string, sp Spec, n, now int64) int64 {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	a := sh.m[ckey{key, sp}]
	if a == nil {
		a, _ = New(sp)
		sh.m[ckey{key, sp}] = a
	}
	return a.Add(now, n)
}

// Count returns the count at time now; an unknown counter counts 0 and is not created.
func (s *Store) Count(key string, sp Spec, now int64) int64 {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if a := sh.m[ckey{key, sp}]; a != nil {
		return a.Count(now)
	}
	return 0
}

// Allow adds n if the count plus n stays within limit, atomically.
func (s *Store) Allow(key string, sp Spec, limit, n, now int64) Decision {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	a := sh.m[ckey{key, sp}]
	if a == nil {
		a, _ = New(sp)
		sh.m[ckey{key, sp}] = a
	}
	return a.Allow(now, limit, n)
}

// Reset forgets the counter and reports whether it existed.
func (s *Store) Reset(key string, sp Spec) bool {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, ok := sh.m[ckey{key, sp}]
	delete(sh.m, ckey{key, sp})
	return ok
}

// Snapshot returns the counter's buckets within the window at now (nil if unknown).
func (s *Store) Snapshot(key string, sp Spec, now int64) []Bucket {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if a := sh.m[ckey{key, sp}]; a != nil {
		return a.Snapshot(now)
	}
	return nil
}

// Merge adds buckets to the counter, creating it if needed.
func (s *Store) Merge(key string, sp Spec, buckets []Bucket) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	a := sh.m[ckey{key, sp}]
	if a == nil {
		a, _ = New(sp)
		sh.m[ckey{key, sp}] = a
	}
	a.Merge(buckets)
}

// Len is the number of counters held.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].m)
		s.shards[i].mu.Unlock()
	}
	return n
}

// Sweep forgets counters that count 0 at now, examining at most budget counters, and
// returns how many it forgot.
func (s *Store) Sweep(now int64, budget int) int {
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, a := range sh.m {
			if a.Count(now) == 0 {
				delete(sh.m, k)
				removed++
			}
		}
		sh.mu.Unlock()
	}
	return removed
}
