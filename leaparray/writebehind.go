package leaparray

// The write-behind of a store made WithDeltas, as its users see it: draining what
// happened to counters since the last drain, reading and adding to what is pending, and
// (Bases) the counters without what is pending, for a persistence store that lost its
// data. How a slab keeps what is pending is in delta.go.

// Drain appends to dst what happened to every counter since the last Drain, and forgets
// it: one Delta per counter that was added to or reset. Without WithDeltas it appends
// nothing.
func (s *Store) Drain(dst []Delta) []Delta {
	s.eachShard(func(t *table, sh *shard) { dst = sh.drain(dst, t.spec) })
	return dst
}

// DrainMatching is Drain for the counters (held or not) whose key match accepts: what
// happened to them since the last drain, as one Delta each, forgotten here. match must
// not keep the key it is given: it is a view of the store's memory.
func (s *Store) DrainMatching(match func(key string) bool, dst []Delta) []Delta {
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			from := len(dst)
			dst = drainMatching(&sh.one, t.spec, match, dst)
			dst = drainMatching(&sh.narrow, t.spec, match, dst)
			dst = drainMatching(&sh.wide, t.spec, match, dst)
			for k := from; k < len(dst); k++ {
				dst[k].Reset = sh.takeReset(dst[k].Key)
			}
			for key := range sh.resets {
				if match(key) {
					dst = append(dst, Delta{Key: key, Spec: t.spec, Reset: true})
					delete(sh.resets, key)
				}
			}
			sh.mu.Unlock()
		}
	}
	return dst
}

func drainMatching[C count](s *slab[C], sp Spec, match func(string) bool, dst []Delta) []Delta {
	if !s.deltas {
		return dst
	}
	for slot := range s.refs.s {
		if s.pend.s[slot] != 0 && match(s.keyView(slot)) {
			if bs := s.takePending(slot); len(bs) > 0 { // a marked counter's ring may be empty
				dst = append(dst, Delta{Key: s.key(slot), Spec: sp, Buckets: bs})
			}
		}
	}
	return dst
}

// Pending returns the counter's buckets not yet drained (a copy; nil when it is not
// held or nothing is pending), and whether a reset of it is not yet drained.
func (s *Store) Pending(key string, sp Spec) (buckets []Bucket, reset bool) {
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		_, reset = sh.resets[key]
		if r, ok := sh.find(key, h); ok {
			buckets = sh.pendingOf(r)
		}
	})
	return buckets, reset
}

// Base returns the counter's buckets without what is pending of them, as Bases gives
// each (nil when it is not held).
func (s *Store) Base(key string, sp Spec) []Bucket {
	var out []Bucket
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		if r, ok := sh.find(key, h); ok {
			out = subtract(sh.buckets(nil, r), sh.pendingOf(r))
		}
	})
	return out
}

func (sh *shard) pendingOf(r ref) []Bucket {
	switch r.tier {
	case one:
		return sh.one.pendingOf(r.slot)
	case narrow:
		return sh.narrow.pendingOf(r.slot)
	}
	return sh.wide.pendingOf(r.slot)
}

// ResetPending reports whether a reset of the counter is recorded and not yet drained
// (by Drain, or taken by Evict): its persisted state is about to be erased, so a node
// must not load that state back. Without WithDeltas it is always false.
func (s *Store) ResetPending(key string, sp Spec) bool {
	pending := false
	s.locked(key, sp, lookup, func(sh *shard, _ uint64, _ int64) {
		_, pending = sh.resets[key]
	})
	return pending
}

// HeldOrResetPending is Has(key, sp) || ResetPending(key, sp) under one lock: what an
// owner asks of every op before it decides it, to tell whether it needs a load.
func (s *Store) HeldOrResetPending(key string, sp Spec) bool {
	known := false
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		if _, known = sh.find(key, h); !known {
			_, known = sh.resets[key]
		}
	})
	return known
}

// AddPending records buckets (and, with reset, a reset ahead of everything pending) as
// pending write-behind of a held counter, without changing its counts, and reports
// whether the counter is held. A node that takes over a counter with the part its last
// owner had not yet persisted calls Seed, then AddPending with that part. Without
// WithDeltas it records nothing.
func (s *Store) AddPending(key string, sp Spec, buckets []Bucket, reset bool) bool {
	held := false
	s.locked(key, sp, lookup, func(sh *shard, h uint64, _ int64) {
		r, ok := sh.find(key, h)
		if !ok {
			return
		}
		held = true
		sh.materialize(r) // what is added now is pending beyond its ring
		for _, b := range buckets {
			sh.noteAdd(r, b.Index, b.Count)
		}
		if reset {
			sh.noteReset(key)
		}
	})
	return held
}

// Bases calls fn with every counter held whose key match accepts, and its buckets
// without what is pending of them (WithDeltas): what a persistence store held of it
// before it lost its data, when every delta drained so far reached it. Written back,
// base and the deltas still to drain make the counter whole again. It locks one shard
// at a time. match must not keep the key it is given: it is a view of the store's
// memory.
func (s *Store) Bases(match func(key string) bool, fn func(key string, sp Spec, base []Bucket)) {
	s.eachShard(func(t *table, sh *shard) {
		basesOf(&sh.one, t.spec, match, fn)
		basesOf(&sh.narrow, t.spec, match, fn)
		basesOf(&sh.wide, t.spec, match, fn)
	})
}

func basesOf[C count](s *slab[C], sp Spec, match func(string) bool, fn func(string, Spec, []Bucket)) {
	for slot := range s.refs.s {
		if match(s.keyView(slot)) {
			fn(s.key(slot), sp, subtract(s.appendBuckets(nil, slot), s.pendingOf(slot)))
		}
	}
}

// subtract takes pending out of buckets, bucket by bucket, dropping those left empty.
func subtract(buckets, pending []Bucket) []Bucket {
	out := buckets[:0]
	for _, b := range buckets {
		for _, p := range pending {
			if p.Index == b.Index {
				b.Count -= min(p.Count, b.Count)
			}
		}
		if b.Count > 0 {
			out = append(out, b)
		}
	}
	return out
}

// DrainCursor is where a pass of DrainSome over a store's shards has got to. The zero
// value starts a pass; the pass takes what was pending in each shard when it reached
// it, so one that keeps being added to cannot hold the pass there.
type DrainCursor struct {
	list   []*table // the tables when the pass began (a table made later waits for the next)
	table  int
	shard  int
	inside bool          // the pass is inside list[table].shards[shard]: quota holds what is left
	quota  [3]drainQuota // of the shard's one, narrow and wide slabs, when it was reached
	begun  bool
}

// DrainSome is Drain in parts: it appends to dst the deltas of at most about max
// counters (a reset without buckets counts as one) and reports whether the pass c is
// over. A writer that persists what a pass drains, part by part, bounds what it holds
// at once by max while the rest waits in the store at its fixed cost per counter.
func (s *Store) DrainSome(c *DrainCursor, dst []Delta, max int) ([]Delta, bool) {
	if !c.begun {
		c.list, c.begun = s.tables.cur.Load().list, true
	}
	from := len(dst)
	for ; c.table < len(c.list); c.table, c.shard = c.table+1, 0 {
		t := c.list[c.table]
		for ; c.shard < len(t.shards); c.shard++ {
			room := max - (len(dst) - from)
			if room <= 0 {
				return dst, false
			}
			sh := &t.shards[c.shard]
			sh.mu.Lock()
			if !c.inside {
				c.quota, c.inside = [3]drainQuota{sh.one.quota(), sh.narrow.quota(), sh.wide.quota()}, true
			}
			var done bool
			dst, done = sh.drainSome(dst, t.spec, &c.quota, room)
			sh.mu.Unlock()
			if !done {
				return dst, false
			}
			c.inside = false
		}
	}
	return dst, true
}

// PendingCounters is about how many counters have deltas not yet drained (a counter
// that left its slot since may be counted): what write-behind has still to take.
func (s *Store) PendingCounters() int {
	n := 0
	s.eachShard(func(_ *table, sh *shard) {
		n += sh.one.pendingCounters() + sh.narrow.pendingCounters() + sh.wide.pendingCounters() + len(sh.resets)
	})
	return n
}

// pendingCounters is about how many of the slab's counters have deltas not yet drained.
func (s *slab[C]) pendingCounters() int { return len(s.dl.s) + s.whole }
