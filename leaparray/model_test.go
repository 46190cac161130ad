package leaparray

// model is the reference the property tests hold the ring and the store to: a plain
// list of timestamped events per counter, with the package's rules spelled out as
// directly as possible (see doc.go).
type model struct {
	counters map[modelKey]*modelCounter
}

type modelKey struct {
	key  string
	spec Spec
}

type modelCounter struct {
	head   int64 // newest bucket added to
	events []modelEvent
}

type modelEvent struct {
	bucket int64
	n      uint64
}

func newModel() *model { return &model{counters: map[modelKey]*modelCounter{}} }

// sum is the count at bucket e: events in (e−B, e].
func (c *modelCounter) sum(e int64, b int) uint64 {
	var s uint64
	for _, ev := range c.events {
		if ev.bucket > e-int64(b) && ev.bucket <= e {
			s += ev.n
		}
	}
	return s
}

func (m *model) counter(key string, sp Spec, now int64, create bool) (*modelCounter, int64) {
	j := sp.Bucket(now)
	c := m.counters[modelKey{key, sp}]
	if c == nil {
		if !create {
			return nil, j
		}
		c = &modelCounter{head: j}
		m.counters[modelKey{key, sp}] = c
	}
	return c, max(j, c.head)
}

func (m *model) incr(key string, sp Spec, n, now int64) int64 {
	c, e := m.counter(key, sp, now, true)
	c.add(e, uint64(n), sp.Buckets)
	return int64(c.sum(e, sp.Buckets))
}

// add records an event at bucket e (e >= head). Events a whole window behind the new
// head can never count again (every operation acts at or after the head), so they are
// dropped to keep the model fast; that changes no answer.
func (c *modelCounter) add(e int64, n uint64, b int) {
	c.head = e
	kept := c.events[:0]
	for _, ev := range c.events {
		if ev.bucket > e-int64(b) {
			kept = append(kept, ev)
		}
	}
	c.events = append(kept, modelEvent{e, n})
}

func (m *model) count(key string, sp Spec, now int64) int64 {
	c, e := m.counter(key, sp, now, false)
	if c == nil {
		return 0
	}
	return int64(c.sum(e, sp.Buckets))
}

// take takes up to n off the events of bucket j while j is in the window at now.
func (m *model) take(key string, sp Spec, j, n, now int64) int64 {
	c, e := m.counter(key, sp, now, false)
	if c == nil || j > e || j <= e-int64(sp.Buckets) {
		return 0
	}
	left := uint64(n)
	for i := range c.events {
		if c.events[i].bucket == j {
			t := min(left, c.events[i].n)
			c.events[i].n -= t
			left -= t
		}
	}
	return n - int64(left)
}

func (m *model) allow(key string, sp Spec, limit, n, now int64) Decision {
	c, e := m.counter(key, sp, now, n <= limit)
	if c == nil {
		return Decision{Remaining: limit, RetryAfterMs: -1}
	}
	cur := int64(c.sum(e, sp.Buckets))
	if cur+n <= limit {
		c.add(e, uint64(n), sp.Buckets)
		return Decision{Allowed: true, Count: cur + n, Remaining: limit - cur - n}
	}
	d := Decision{Count: cur, Remaining: max(0, limit-cur), RetryAfterMs: -1}
	if n <= limit {
		for k := int64(1); ; k++ {
			// at bucket e+k the events still in the window are those in (e+k−B, e].
			left := int64(0)
			for _, ev := range c.events {
				if ev.bucket > e+k-int64(sp.Buckets) && ev.bucket <= e {
					left += int64(ev.n)
				}
			}
			if left+n <= limit {
				d.RetryAfterMs = (e+k)*sp.BucketMs() - now
				break
			}
		}
	}
	return d
}

func (m *model) reset(key string, sp Spec, now int64) bool {
	c, ok := m.counters[modelKey{key, sp}]
	delete(m.counters, modelKey{key, sp})
	return ok && c.head > sp.Bucket(now)-int64(sp.Buckets)
}

// sweep forgets what a complete Store.Sweep at now forgets.
func (m *model) sweep(now int64) int {
	n := 0
	for k, c := range m.counters {
		if c.head <= k.spec.Bucket(now)-int64(k.spec.Buckets) {
			delete(m.counters, k)
			n++
		}
	}
	return n
}
