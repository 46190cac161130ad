package leaparray

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// table holds the counters of one Spec. Slabs have a fixed stride per Spec, so each
// Spec gets its own table; real deployments use a handful of Specs.
type table struct {
	spec     Spec
	bucketMs int64
	shards   []shard
	mask     uint64
	dead     bool // set with every shard lock held; read under any one
}

func newTable(sp Spec, nshards int, deltas bool, lim *bounds) *table {
	t := &table{spec: sp, bucketMs: sp.BucketMs(), shards: make([]shard, nshards), mask: uint64(nshards - 1)}
	for i := range t.shards {
		t.shards[i].init(sp, deltas, lim)
	}
	return t
}

// shard picks the shard by bits 40-45 of the hash; a slab index keeps the high 32 bits as
// a fingerprint and places entries by the fingerprint (home), in which the shard bits
// are the same for every key of the shard and the others are spread by a multiply.
func (t *table) shard(h uint64) *shard { return &t.shards[(h>>40)&t.mask] }

// tables is the store's immutable set of tables, replaced whole when a Spec is added or
// removed, so that finding a table on the hot path takes no lock.
type tables struct {
	list   []*table
	bySpec map[Spec]*table // used past a few Specs, where a scan gets slower than a map
}

const scanTables = 8

func (ts *tables) get(sp Spec) *table {
	if ts.bySpec != nil {
		return ts.bySpec[sp]
	}
	for _, t := range ts.list {
		if t.spec == sp {
			return t
		}
	}
	return nil
}

func makeTables(list []*table) *tables {
	ts := &tables{list: list}
	if len(list) > scanTables {
		ts.bySpec = make(map[Spec]*table, len(list))
		for _, t := range list {
			ts.bySpec[t.spec] = t
		}
	}
	return ts
}

// tableSet is the store's tables and the lock for changing them.
type tableSet struct {
	cur     atomic.Pointer[tables]
	mu      sync.Mutex // serializes adding and removing tables
	nshards int
	deltas  bool
	lim     *bounds // with WithBounds
}

func (s *tableSet) init() {
	s.nshards = nextPow2(max(64, 4*runtime.GOMAXPROCS(0)))
	s.cur.Store(makeTables(nil))
}

func (s *tableSet) get(sp Spec) *table { return s.cur.Load().get(sp) }

// free gives back what the slabs hold mapped, once their Store is unreachable (the
// cleanup NewStore registers): mapped memory is not the collector's to reclaim. Tables
// dropped before hold none (they were empty). It takes each shard's lock, so that an
// operation still at work on a shard finishes first: the compiler may let a Store die
// while its method still works on one of its tables.
func (s *tableSet) free() {
	for _, t := range s.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			sh.free()
			sh.mu.Unlock()
		}
	}
}

// getOrCreate returns sp's table, making it if m lets it: a bounded operation does not
// add a Spec past the bounds (ErrTooManyShapes). The list is copied whole on each new
// Spec, which the bound on Specs keeps cheap.
func (s *tableSet) getOrCreate(sp Spec, m mode) (*table, error) {
	if t := s.get(sp); t != nil {
		return t, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	if t := old.get(sp); t != nil {
		return t, nil
	}
	if s.lim.shapesFull(len(old.list), m) {
		return nil, ErrTooManyShapes
	}
	t := newTable(sp, s.nshards, s.deltas, s.lim)
	s.cur.Store(makeTables(append(old.list[:len(old.list):len(old.list)], t)))
	return t, nil
}
