package leaparray

import "sync"

// sweepCursor is where the incremental sweep goes on from: a table and a shard within
// it. Each shard also remembers the slot it stopped at.
type sweepCursor struct {
	mu    sync.Mutex // one sweep at a time
	table int
	shard int
}

// Sweep forgets counters that have been untouched for a whole window at now (they count
// 0), looking at no more than budget counters, and returns how many it forgot. Calling
// it regularly with a budget near Len()/passes makes a full pass every passes calls;
// each shard lock is held for at most budget counters.
func (s *Store) Sweep(now int64, budget int) int {
	s.cursor.mu.Lock()
	defer s.cursor.mu.Unlock()
	removed, wrapped := s.sweepSteps(now, budget)
	if wrapped { // once per full pass: it takes every shard lock of every table
		s.dropEmptyTables()
	}
	return removed
}

// sweepSteps is Sweep without dropping empty tables; wrapped says it finished a pass.
// The caller holds cursor.mu.
func (s *Store) sweepSteps(now int64, budget int) (removed int, wrapped bool) {
	list := s.tables.cur.Load().list
	for visited := 0; budget > 0 && len(list) > 0 && visited <= len(list)*len(list[0].shards); visited++ {
		if s.cursor.table >= len(list) {
			s.cursor.table, s.cursor.shard = 0, 0
		}
		t := list[s.cursor.table]
		n, looked, done := t.shards[s.cursor.shard].sweepStep(t.spec, now, budget)
		removed += n
		budget -= looked
		if !done {
			break
		}
		if s.cursor.shard++; s.cursor.shard == len(t.shards) {
			s.cursor.table, s.cursor.shard = s.cursor.table+1, 0
			if s.cursor.table == len(list) {
				wrapped = true
			}
		}
	}
	return removed, wrapped
}

// sweepStep looks at up to budget counters from where the last step stopped. done says
// the shard was scanned to its end.
func (sh *shard) sweepStep(sp Spec, now int64, budget int) (removed, looked int, done bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	oldest := sp.Bucket(now) - int64(sp.Buckets) // a head at or before this counts 0
	for looked < budget {
		r, ok := sh.nth(sh.sweep)
		if !ok {
			sh.sweep = 0
			return removed, looked, true
		}
		looked++
		if sh.headOf(r).bucket > oldest {
			sh.sweep++
			continue
		}
		// remove moves the last counter of the slab into this slot, so look at the same
		// slot again.
		sh.remove(r, hashKey(sh.key(r)))
		removed++
	}
	return removed, looked, false
}

// dropEmptyTables removes the tables of Specs that hold no counter (and no reset not yet
// drained), so a client that
// cycles through many window shapes does not leave a table behind for each.
func (s *Store) dropEmptyTables() {
	s.tables.mu.Lock()
	defer s.tables.mu.Unlock()
	old := s.tables.cur.Load().list
	keep := make([]*table, 0, len(old))
	for _, t := range old {
		if !t.retireIfEmpty() {
			keep = append(keep, t)
		}
	}
	if len(keep) != len(old) {
		s.tables.cur.Store(makeTables(keep))
	}
}

// retireIfEmpty marks an empty table dead, holding every shard lock so that no
// operation can add to it in between; operations that still hold the table see dead
// and look the Spec up again.
func (t *table) retireIfEmpty() bool {
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	empty := true
	for i := range t.shards {
		empty = empty && t.shards[i].len() == 0 && len(t.shards[i].resets) == 0 // a reset still owed to Redis keeps it
	}
	t.dead = empty
	for i := range t.shards {
		t.shards[i].mu.Unlock()
	}
	return empty
}
