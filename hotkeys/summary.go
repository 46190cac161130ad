package hotkeys

// summary is the space-saving stream summary of at most capacity keys: entries in
// buckets of equal count, the buckets in a list by rising count, so that counting a
// key moves it to the next bucket, and a new key, once full, takes the place of one
// of the least counted (inheriting its count as its possible overestimate).
type summary struct {
	capacity int
	entries  map[string]*entry
	min      *bucket // the least count; nil when empty
	free     *bucket // buckets emptied, for reuse
}

type entry struct {
	key        string
	err        uint64 // count it may have inherited from the key it replaced
	b          *bucket
	prev, next *entry // within b
}

type bucket struct {
	count      uint64
	first      *entry
	prev, next *bucket // by rising count
}

func newSummary(capacity int) *summary {
	return &summary{capacity: capacity, entries: make(map[string]*entry, capacity)}
}

// add counts one occurrence of key.
func (s *summary) add(key string) {
	if e := s.entries[key]; e != nil {
		s.bump(e)
		return
	}
	if len(s.entries) < s.capacity {
		e := &entry{key: cloneKey(key)}
		s.entries[e.key] = e
		s.place(e, nil, 1)
		return
	}
	e := s.min.first // one of the least counted gives way
	delete(s.entries, e.key)
	e.key, e.err = cloneKey(key), e.b.count
	s.entries[e.key] = e
	s.bump(e)
}

// bump moves e from its bucket to the one counting one more.
func (s *summary) bump(e *entry) {
	from := e.b
	s.unlink(e)
	s.place(e, from, from.count+1)
	if from.first == nil {
		s.drop(from)
	}
}

// place puts e in the bucket of count, which comes right after after (nil: at the
// head of the list), making it when it is not there.
func (s *summary) place(e *entry, after *bucket, count uint64) {
	next := s.min
	if after != nil {
		next = after.next
	}
	b := next
	if b == nil || b.count != count {
		b = s.newBucket(count)
		b.prev, b.next = after, next
		if next != nil {
			next.prev = b
		}
		if after != nil {
			after.next = b
		} else {
			s.min = b
		}
	}
	e.b, e.prev, e.next = b, nil, b.first
	if b.first != nil {
		b.first.prev = e
	}
	b.first = e
}

func (s *summary) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		e.b.first = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
}

// drop takes the empty bucket b out of the list, keeping it for reuse.
func (s *summary) drop(b *bucket) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		s.min = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	}
	*b = bucket{next: s.free}
	s.free = b
}

func (s *summary) newBucket(count uint64) *bucket {
	b := s.free
	if b == nil {
		return &bucket{count: count}
	}
	s.free = b.next
	*b = bucket{count: count}
	return b
}

// each calls f for every key with its count and possible overestimate.
func (s *summary) each(f func(key string, count, err uint64)) {
	for b := s.min; b != nil; b = b.next {
		for e := b.first; e != nil; e = e.next {
			f(e.key, b.count, e.err)
		}
	}
}

// cloneKey copies key, so that the summary never holds a caller's buffer.
func cloneKey(key string) string { return string([]byte(key)) }

// reset empties s, keeping its map's room.
func (s *summary) reset() {
	clear(s.entries)
	s.min, s.free = nil, nil
}
