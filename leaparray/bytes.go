package leaparray

import "unsafe"

// Bytes is the memory the store's counters hold: the capacity of every slab's arrays,
// pending deltas and resets included (not the fixed cost of shards and tables). It
// locks each shard in turn, briefly. A node watches it to tell when a sweep freed
// enough to be worth giving back to the operating system.
func (s *Store) Bytes() int64 {
	var n int64
	for _, t := range s.tables.cur.Load().list {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			n += sh.one.bytes() + sh.narrow.bytes() + sh.wide.bytes()
			for k := range sh.resets {
				n += int64(len(k)) + resetEntryBytes
			}
			sh.mu.Unlock()
		}
	}
	return n
}

// moreEntryBytes estimates a more map entry beyond its buckets: the slot, the slice
// header and the map's own slot.
const moreEntryBytes = 48

// resetEntryBytes estimates a resets map entry beyond its key's bytes: the string
// header and the map's own slot.
const resetEntryBytes = 32

func (s *slab[C]) bytes() int64 {
	n := s.index.memBytes() + s.keys.memBytes() + s.refs.memBytes() + s.heads.memBytes() +
		s.counts.memBytes() + s.pend.memBytes() + s.dl.memBytes()
	for _, bs := range s.more {
		n += moreEntryBytes + int64(cap(bs))*int64(unsafe.Sizeof(Bucket{}))
	}
	return n
}
