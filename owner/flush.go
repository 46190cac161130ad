package owner

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// flusher is the write-behind state. Deltas go to Redis in batches whose every script
// call applies at most once however often it is sent (fallback.Batch), strictly in
// order: while a batch is not confirmed nothing newer is sent, so a reset (a delete in
// Redis) is never overtaken by an older add sent again. Deltas wait meanwhile in the
// store (which keeps adding to them) or in queue (those of counters taken out of
// memory), so an outage costs memory in proportion to the counters, not to the ops.
type flusher struct {
	mu      sync.Mutex
	queue   []fallback.Delta // deltas of counters taken out of memory, not yet in a batch
	batches []sentBatch      // unconfirmed, oldest first
	refs    map[fallback.CounterRef]int
	buf     []leaparray.Delta

	running sync.Mutex // one flush at a time
	// Under running: the partition stamps' epoch this node's stamps went to, and
	// fallback.Store.Reopened when they did (fresh.go).
	epoch    string
	reopened uint64
	kick     chan struct{}
	settled  atomic.Pointer[chan struct{}] // closed and replaced after every flush
}

type sentBatch struct {
	b    *fallback.Batch
	refs []fallback.CounterRef
}

func (f *flusher) init() {
	f.refs = map[fallback.CounterRef]int{}
	f.kick = make(chan struct{}, 1)
	ch := make(chan struct{})
	f.settled.Store(&ch)
}

func refOf(d fallback.Delta) fallback.CounterRef {
	return fallback.CounterRef{Key: d.Key, Spec: d.Spec}
}

func (f *flusher) ref(ds []fallback.Delta, by int) {
	for _, d := range ds {
		r := refOf(d)
		if f.refs[r] += by; f.refs[r] <= 0 {
			delete(f.refs, r)
		}
	}
}

// enqueue adds deltas of counters taken out of memory; they go before anything the
// store gains later.
func (f *flusher) enqueue(ds []fallback.Delta) {
	if len(ds) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, ds...)
	f.ref(ds, 1)
}

// unsettledIn lists the counters of the partitions in set that have deltas not yet
// confirmed in Redis.
func (f *flusher) unsettledIn(rg *ring.Ring, set lease.Set) []fallback.CounterRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fallback.CounterRef
	for r := range f.refs {
		if set.Has(rg.Partition(r.Key)) {
			out = append(out, r)
		}
	}
	return out
}

// unsettledRef reports whether the counter has deltas not yet confirmed in Redis: its
// Redis state is behind, so it must not be loaded.
func (f *flusher) unsettledRef(key string, sp leaparray.Spec) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refs[fallback.CounterRef{Key: key, Spec: sp}] > 0
}

func (o *Owner) kickFlush() {
	select {
	case o.flush.kick <- struct{}{}:
	default:
	}
}

// flushOnce sends the unconfirmed batches again, in order, and if all are confirmed
// a new batch of the queue and what the store gained since the last drain.
func (o *Owner) flushOnce(ctx context.Context) {
	if o.cfg.Redis == nil {
		return
	}
	f := &o.flush
	f.running.Lock()
	defer f.running.Unlock()
	defer f.signal()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !o.markLate(ctx) {
		return // Redis is away: nothing else would go either
	}
	for {
		f.mu.Lock()
		if len(f.batches) == 0 {
			f.mu.Unlock()
			break
		}
		sb := f.batches[0]
		f.mu.Unlock()
		if !o.send(ctx, sb) {
			return
		}
		f.mu.Lock()
		f.batches = f.batches[1:]
		f.mu.Unlock()
	}
	f.buf = o.cfg.Store.Drain(f.buf[:0])
	f.mu.Lock()
	ds := f.queue
	f.queue = nil
	drained := toFallback(f.buf)
	f.ref(drained, 1)
	ds = append(ds, drained...)
	if len(ds) == 0 {
		f.mu.Unlock()
		return
	}
	sb := sentBatch{b: o.cfg.Redis.NewBatch(o.cfg.Writer, ds), refs: refsOf(ds)}
	f.batches = append(f.batches, sb)
	f.mu.Unlock()
	if o.send(ctx, sb) {
		f.mu.Lock()
		f.batches = f.batches[1:]
		f.mu.Unlock()
	}
}

// send sends a batch's unconfirmed calls and reports whether all are now confirmed,
// releasing its counters' refs when they are.
func (o *Owner) send(ctx context.Context, sb sentBatch) bool {
	if err := o.stamp(ctx, sb.refs); err != nil {
		o.cfg.Logger.Debug("write-behind waits: its partitions' stamps were not written", "err", err)
		return false
	}
	if err := o.cfg.Redis.SendBatch(ctx, sb.b); err != nil || !sb.b.Confirmed() {
		o.cfg.Logger.Debug("write-behind incomplete; sent again later", "err", err, "in_doubt", sb.b.InDoubt())
		return false
	}
	o.noteLate(sb.refs)
	o.markLate(ctx) // before the refs go: a load that waited for them must find the mark
	o.flush.mu.Lock()
	for _, r := range sb.refs {
		if o.flush.refs[r]--; o.flush.refs[r] <= 0 {
			delete(o.flush.refs, r)
		}
	}
	o.flush.mu.Unlock()
	return true
}

func (f *flusher) signal() {
	ch := make(chan struct{})
	close(*f.settled.Swap(&ch))
}

// waitSettled flushes until none of refs has deltas left unconfirmed, and reports
// whether that happened before ctx ended.
func (o *Owner) waitSettled(ctx context.Context, refs []fallback.CounterRef) bool {
	for {
		ch := o.flush.settled.Load()
		if !o.anyUnsettled(refs) {
			return true
		}
		o.kickFlush()
		select {
		case <-*ch:
		case <-ctx.Done():
			return !o.anyUnsettled(refs)
		}
	}
}

func (o *Owner) anyUnsettled(refs []fallback.CounterRef) bool {
	o.flush.mu.Lock()
	defer o.flush.mu.Unlock()
	for _, r := range refs {
		if o.flush.refs[r] > 0 {
			return true
		}
	}
	return false
}

// takeUnsent removes from the write-behind the deltas of refs that were never sent to
// Redis, and returns them: their counters travel to another node with them, which
// writes them. Deltas that were sent and not answered stay: they may have been applied,
// and only sending them again with their once-ID can tell.
func (o *Owner) takeUnsent(refs []fallback.CounterRef) map[fallback.CounterRef][]fallback.Delta {
	f := &o.flush
	f.running.Lock() // no flush in flight: what is unsent stays so
	defer f.running.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	want := make(map[fallback.CounterRef]bool, len(refs))
	for _, r := range refs {
		want[r] = true
	}
	out := map[fallback.CounterRef][]fallback.Delta{}
	var back []fallback.Delta
	for i := range f.batches {
		taken := f.batches[i].b.TakeUnsent()
		f.batches[i].refs = without(f.batches[i].refs, taken)
		for _, d := range taken {
			if want[refOf(d)] {
				out[refOf(d)] = append(out[refOf(d)], d)
			} else {
				back = append(back, d)
			}
		}
	}
	kept := back
	for _, d := range f.queue {
		if want[refOf(d)] {
			out[refOf(d)] = append(out[refOf(d)], d)
		} else {
			kept = append(kept, d)
		}
	}
	f.queue = kept
	for _, ds := range out {
		f.ref(ds, -1)
	}
	return out
}

// without removes from refs one entry per delta taken.
func without(refs []fallback.CounterRef, taken []fallback.Delta) []fallback.CounterRef {
	n := map[fallback.CounterRef]int{}
	for _, d := range taken {
		n[refOf(d)]++
	}
	kept := refs[:0:0]
	for _, r := range refs {
		if n[r] > 0 {
			n[r]--
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

func toFallback(ds []leaparray.Delta) []fallback.Delta {
	out := make([]fallback.Delta, len(ds))
	for i, d := range ds {
		out[i] = fallback.Delta{Key: d.Key, Spec: d.Spec, Buckets: d.Buckets, Reset: d.Reset}
	}
	return out
}

func refsOf(ds []fallback.Delta) []fallback.CounterRef {
	out := make([]fallback.CounterRef, len(ds))
	for i, d := range ds {
		out[i] = refOf(d)
	}
	return out
}

// pendingOf is the write-behind of counters taken out of memory: what each had not yet
// written, and whether a reset was not yet written.
func pendingOf(ev []leaparray.Evicted) []fallback.Delta {
	var out []fallback.Delta
	for _, e := range ev {
		if len(e.Pending) > 0 || e.Reset {
			out = append(out, fallback.Delta{Key: e.Key, Spec: e.Spec, Buckets: e.Pending, Reset: e.Reset})
		}
	}
	return out
}
