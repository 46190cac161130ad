package sim

import (
	"slices"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/owner"
)

// simBatch is a batch of write-behind calls, each applied at most once (by its seq).
type simBatch struct {
	calls []*simCall
	late  []fallback.Delta // resets with a deadline not known to have applied (LateResets)
	clock int64            // Redis's clock, µs, as the last send's calls ran (RedisTime)
}

type callState uint8

const (
	unsent callState = iota
	inDoubt
	confirmed
)

type simCall struct {
	writer string
	seq    uint64
	deltas []fallback.Delta
	state  callState
	// applied: Redis applied the call (its counts are in Redis, or were until it lost
	// its data: what a loss may lose, wipes.go).
	applied bool
}

// NewBatch cuts deltas into calls of at most 8 counters (a counter's deltas in one),
// each with the client's next seq, as fallback.Store.NewBatch does.
func (c *redisClient) NewBatch(writer string, ds []fallback.Delta) owner.Batch {
	b := &simBatch{}
	var cur *simCall
	seen := map[fallback.CounterRef]*simCall{}
	for _, d := range ds {
		ref := fallback.CounterRef{Key: d.Key, Spec: d.Spec}
		if k := seen[ref]; k != nil {
			k.deltas = append(k.deltas, d)
			continue
		}
		if cur == nil || len(cur.deltas) >= 8 {
			c.seq++
			cur = &simCall{writer: writer, seq: c.seq}
			b.calls = append(b.calls, cur)
		}
		cur.deltas = append(cur.deltas, d)
		seen[ref] = cur
	}
	return b
}

// SendBatch sends the calls not yet confirmed, in order, in one round trip.
func (c *redisClient) SendBatch(ob owner.Batch, done func(error)) {
	b := ob.(*simBatch)
	b.clock = 0
	var todo []*simCall
	for _, k := range b.calls {
		if k.state != confirmed {
			todo = append(todo, k)
		}
	}
	if len(todo) == 0 {
		c.n.w.sched.after(0, c.n, func() { done(nil) })
		return
	}
	if c.srv.down {
		c.call(nil, func(any, error) { done(errRedisDown) }) // refused: unsent
		return
	}
	for _, k := range todo {
		if k.state == unsent {
			k.state = inDoubt // on its way: only its answer says whether it applied
		}
	}
	var clock int64
	appliedNow := map[*simCall]map[int]bool{} // the calls this send applied: their late resets
	c.call(func() any {
		w := c.srv.w
		clock = w.epochMs*1000 + int64(w.sched.now/time.Microsecond)
		for _, k := range todo {
			if k.seq > c.srv.marks[k.writer] {
				appliedNow[k] = map[int]bool{}
				for i, d := range k.deltas {
					if d.Reset && d.ResetBy > 0 && clock >= d.ResetBy {
						// Past its deadline (merge_many): a Base is skipped, a reset dropped.
						appliedNow[k][i] = true
						if d.Base {
							continue
						}
						d.Reset = false
					}
					c.srv.w.noteWrite(c.n, d, k.writer, k.seq)
					c.srv.w.wipeWrittenBack(d.Key, k.writer, d.Base)
					c.srv.apply(d)
					if d.Key == debugKey {
						c.srv.w.trace("DEBUG redis applies %s's delta of %s (%s #%d): reset %v buckets %v -> %d", c.n.name, d.Key, k.writer, k.seq, d.Reset, d.Buckets, c.srv.count(ref(d.Key), c.n.w.epochMs+int64(c.n.w.sched.now/time.Millisecond)))
					}
				}
				c.srv.marks[k.writer] = k.seq
				k.applied = true
			}
		}
		return c.srv.replicated()
	}, func(v any, err error) {
		if err = c.wrote(v == true, err); err == nil {
			b.clock = clock
			for _, k := range todo {
				k.state = confirmed
				late, now := appliedNow[k]
				b.late = append(b.late, fallback.LateStates(k.deltas, func(i int) bool {
					if now {
						return late[i]
					}
					d := k.deltas[i] // found applied before: it may have run as late as now
					return d.Reset && d.ResetBy > 0 && clock >= d.ResetBy
				})...)
			}
		}
		done(err)
	})
}

func (b *simBatch) LateResets() []fallback.Delta {
	late := b.late
	b.late = nil
	return late
}

func (b *simBatch) RedisTime() int64 { return b.clock }

func (b *simBatch) Confirmed() bool {
	for _, k := range b.calls {
		if k.state != confirmed {
			return false
		}
	}
	return true
}

func (b *simBatch) InDoubt() bool {
	return slices.ContainsFunc(b.calls, func(k *simCall) bool { return k.state == inDoubt })
}

func (b *simBatch) TakeUnsent() []fallback.Delta {
	var out []fallback.Delta
	kept := b.calls[:0]
	for _, k := range b.calls {
		if k.state == unsent {
			out = append(out, k.deltas...)
		} else {
			kept = append(kept, k)
		}
	}
	b.calls = kept
	return out
}

func (b *simBatch) Fences(match func(fallback.Delta) bool) []fallback.Fence {
	top := map[string]uint64{}
	var keys []string
	for _, k := range b.calls {
		if k.state != inDoubt || !slices.ContainsFunc(k.deltas, match) {
			continue
		}
		if _, ok := top[k.writer]; !ok {
			keys = append(keys, k.writer)
		}
		top[k.writer] = max(top[k.writer], k.seq)
	}
	var out []fallback.Fence
	for _, key := range keys {
		out = append(out, fallback.Fence{WriterKey: key, Seq: top[key]})
	}
	return out
}

func (b *simBatch) Unconfirmed() []fallback.Delta {
	var out []fallback.Delta
	for _, k := range b.calls {
		if k.state != confirmed {
			out = append(out, k.deltas...)
		}
	}
	return out
}
