package owner

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/lockrank"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// flusher is the write-behind state. Deltas go to Redis in batches whose every script
// call applies at most once however often it is sent (fallback.Batch), strictly in
// order: while a batch is not confirmed nothing newer is sent, so a reset (a delete in
// Redis) is never overtaken by an older add sent again. Deltas wait meanwhile in the
// store (which keeps adding to them) or in queue (those of counters taken out of
// memory, one per counter however often it left), so an outage costs memory in
// proportion to the counters, not to the ops.
type flusher struct {
	// mu guards queue and refs, which ops read (a load waits for its counter's deltas),
	// and the callbacks waiting for a flush to end.
	mu     lockrank.Mutex[lockrank.OwnerFlush]
	queue  []fallback.Delta // deltas of counters taken out of memory, not yet in a batch
	queued map[fallback.CounterRef]int
	refs   map[fallback.CounterRef]int // counters with deltas not yet confirmed: how many places hold them
	// The most entries queued and refs held since they were last made anew (shed).
	queuedHigh, refsHigh int
	settleWaiters        []func() // called when the flush in flight ends

	// Under Owner.mu: the batches not yet confirmed, oldest first, and the flush in
	// flight.
	batches  []*sentBatch
	inFlight bool
	era      uint64 // stamps made in an earlier era are forgotten (forgetStamps)
	again    bool   // asked for while one was in flight: another follows
	drained  bool   // the flush in flight has drained the store and the queue
	buf      []leaparray.Delta
	// The flush in flight drains the store in parts of at most Config.FlushBatch
	// counters, one batch each (cursor), and the queue ahead of them: it is over once
	// the store's pass and the queue it found (queueDue entries, of which queueTaken are
	// taken) are.
	cursor     leaparray.DrainCursor
	queueDue   int
	queueTaken int
	// The partition stamps' epoch this node's stamps went to, and
	// Redis.Reopened when they did (loadskip.go).
	epoch    string
	reopened uint64

	// After a flush that failed (Redis down or slow), the next waits for retryAt, with
	// backoff: ops that wait for a flush ask for one as often as they are woken, and
	// each failed flush wakes them.
	failures int
	retryAt  time.Duration // Clock.Since
	retrying bool          // a Tick is due at retryAt

	kicked  atomic.Bool   // a Tick is on its way (Owner.kick)
	rounds  atomic.Uint64 // flushes ended
	failed  atomic.Uint64 // flushes that failed: their batches go again (WriteBehindStats)
	inDoubt atomic.Bool   // at the last flush's end, some call was sent and not answered
}

type sentBatch struct {
	b    Batch
	refs []fallback.CounterRef
	made time.Duration // Clock.Since when it was made (WriteBehindLag)
	// newest is the start (ms) of the newest bucket among its deltas: its stamps are no
	// older (loadskip.go stamp).
	newest int64
	// lapsed are the partitions whose lease ended after this batch was made: its
	// resets of their counters are dropped before it goes again (dropLateResets).
	lapsed lease.Set
	// staleBases are the partitions whose memory went stale by another node's late
	// write after this batch was made: its whole states of their counters are dropped
	// before it goes again (dropStaleBases).
	staleBases lease.Set
	// handed are the partitions whose deltas in this batch were handed on directly
	// under a fence (ownFences) since Redis last lost its data; orphaned those handed
	// on before it did (writeBackInFull): see dropSentInHandoffs.
	handed, orphaned lease.Set
	// partial are the counters of handed or orphaned partitions that went without
	// their buckets (partialMemory): their receiver's memory lacks these deltas, so
	// they are never left to it (dropSentInHandoffs).
	partial map[fallback.CounterRef]bool
	// subsumed are the counters of handed partitions whose pending part went with a
	// reset after this batch, and losses the times this node had seen Redis lose its
	// data when it was made: see dropSentInHandoffs.
	subsumed map[fallback.CounterRef]bool
	losses   int
}

// markPartial notes, of the counters of this batch in partition p, those partial says
// go without their buckets (all of them, stale).
func (sb *sentBatch) markPartial(rg *ring.Ring, p int, stale bool, partial func(key string) bool) {
	for _, ref := range sb.refs {
		if rg.Partition(ref.Key) == p && (stale || partial(ref.Key)) {
			if sb.partial == nil {
				sb.partial = map[fallback.CounterRef]bool{}
			}
			sb.partial[ref] = true
		}
	}
}

func (f *flusher) init() {
	f.refs = map[fallback.CounterRef]int{}
	f.queued = map[fallback.CounterRef]int{}
}

func refOf(d fallback.Delta) fallback.CounterRef {
	return fallback.CounterRef{Key: d.Key, Spec: d.Spec}
}

// reindexQueue makes queued point at each counter's last entry in the queue again,
// as enqueue does, after some left it. The caller holds f.mu.
func (f *flusher) reindexQueue() {
	clear(f.queued)
	for i, d := range f.queue {
		f.queued[refOf(d)] = i
	}
}

// enqueue adds deltas of counters taken out of memory; they go before anything the
// store gains later. A counter's deltas fold into the one it has queued already.
func (f *flusher) enqueue(ds []fallback.Delta) {
	if len(ds) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		r := refOf(d)
		if i, ok := f.queued[r]; ok && !d.Base && !f.queue[i].Base {
			f.queue[i] = fold(f.queue[i], d)
			continue
		}
		f.queued[r] = len(f.queue) // (a base goes alone: it may be dropped alone)
		f.queue = append(f.queue, d)
		f.refs[r]++
	}
	f.queuedHigh, f.refsHigh = max(f.queuedHigh, len(f.queued)), max(f.refsHigh, len(f.refs))
}

// enqueueOlder adds deltas taken back out of a batch (stripLateResets): older than
// anything queued of their counters since the batch was made, so each goes before
// them. Added after them, a reset taken back would erase the counts that followed it.
func (f *flusher) enqueueOlder(ds []fallback.Delta) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		r := refOf(d)
		first := slices.IndexFunc(f.queue, func(q fallback.Delta) bool { return refOf(q) == r })
		switch {
		case first < 0:
			f.queued[r] = len(f.queue)
			f.queue = append(f.queue, d)
			f.refs[r]++
		case !d.Base && !f.queue[first].Base:
			f.queue[first] = fold(d, f.queue[first])
		default:
			f.queue = slices.Insert(f.queue, first, d)
			f.refs[r]++
			f.reindexQueue()
		}
	}
	f.queuedHigh, f.refsHigh = max(f.queuedHigh, len(f.queued)), max(f.refsHigh, len(f.refs))
}

// fold is delta a followed by b, as one: a reset in b drops what a added.
func fold(a, b fallback.Delta) fallback.Delta {
	if b.Reset {
		return b
	}
	a.Buckets = fallback.AddBuckets(append([]leaparray.Bucket(nil), a.Buckets...), b.Buckets)
	return a
}

// empty reports whether no delta waits to be written: none queued, none in a batch.
// The caller holds Owner.mu.
func (f *flusher) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue) == 0 && len(f.batches) == 0
}

// unref releases one hold on each of refs; a counter none holds is settled.
func (f *flusher) unref(refs []fallback.CounterRef) {
	for _, r := range refs {
		if n := f.refs[r] - 1; n > 0 {
			f.refs[r] = n
		} else {
			delete(f.refs, r) // (a map operation fewer than decrementing first: a flood's counters are held once)
		}
	}
}

// unsettledIn lists the counters of the partitions in set that have deltas not yet
// confirmed in Redis, sorted.
func (f *flusher) unsettledIn(rg *ring.Ring, set lease.Set) []fallback.CounterRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fallback.CounterRef
	for r := range f.refs {
		if set.Has(rg.Partition(r.Key)) {
			out = append(out, r)
		}
	}
	sortRefs(out)
	return out
}

// unsettledRef reports whether the counter has deltas not yet confirmed in Redis: its
// Redis state is behind, so it must not be loaded.
func (f *flusher) unsettledRef(key string, sp leaparray.Spec) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refs[fallback.CounterRef{Key: key, Spec: sp}] > 0
}

// onEnd calls fn once the flush in flight (or the next) ends.
func (f *flusher) onEnd(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settleWaiters = append(f.settleWaiters, fn)
}

// flushStart starts a flush unless one is in flight (then another follows it): it
// sends the unconfirmed batches again, in order, and if all are confirmed a new batch
// of the queue and what the store gained since the last drain. The caller holds mu.
func (o *Owner) flushStart() {
	f := &o.flush
	if o.cfg.Redis == nil {
		o.flushEnded()
		return
	}
	if f.inFlight {
		f.again = true
		return
	}
	if now := o.cfg.Clock.Since(); now < f.retryAt {
		if !f.retrying {
			f.retrying = true
			o.cfg.Clock.AfterFunc(f.retryAt-now, func() {
				o.post(func() {
					o.flush.retrying = false
					o.tick()
				})
			})
		}
		return
	}
	f.inFlight, f.again, f.drained = true, false, false
	f.cursor, f.queueTaken = leaparray.DrainCursor{}, 0
	f.mu.Lock()
	f.queueDue = len(f.queue)
	f.mu.Unlock()
	if !o.markLate(func(ok bool) {
		if ok {
			o.flushNext()
		} else {
			o.flushFailed()
		}
	}) {
		o.flushNext()
	}
}

// flushNext sends the oldest unconfirmed batch, draining a new one first when none is
// left; the flush ends when there is nothing more to send or a batch stays unconfirmed.
// The caller holds mu.
func (o *Owner) flushNext() {
	f := &o.flush
	for len(f.batches) == 0 && !f.drained {
		f.drained = o.drainBatch()
	}
	if len(f.batches) == 0 {
		o.flushEnd()
		return
	}
	sb := f.batches[0]
	o.stripLateResets(sb)
	if sb.b.InDoubt() {
		// Its stamps read the epoch before it goes again: Redis that lost its data
		// meanwhile lost the record that makes each call apply once (dropSentInHandoffs).
		o.forgetStamps()
	}
	o.stamp(sb.refs, sb.newest, func(err error) {
		if err != nil {
			o.cfg.Logger.Debug("write-behind waits: its partitions' stamps were not written", "err", err)
			o.flushFailed()
			return
		}
		o.dropSentInHandoffs(sb) // (the stamp may have just found Redis emptied)
		o.dropLapsedInDoubt(sb)
		o.ask(func() {
			o.cfg.Redis.SendBatch(sb.b, func(err error) {
				o.post(func() { o.sent(sb, err) })
			})
		})
	})
}

// sent goes on after a batch's send: confirmed, its counters settle (its late writes
// marked first) and the next batch goes; else the flush ends.
func (o *Owner) sent(sb *sentBatch, err error) {
	o.noteRedisTime(sb.b)
	if err != nil || !sb.b.Confirmed() {
		o.cfg.Logger.Debug("write-behind incomplete; sent again later", "err", err, "in_doubt", sb.b.InDoubt())
		o.flushFailed()
		return
	}
	o.flush.failures, o.flush.retryAt = 0, 0
	o.lateResetsDone(sb)
	o.noteLate(sb.refs)
	o.noteDeparted(sb.refs, sb.newest)
	settle := func(bool) { // the marks before the refs go: a load that waited for them must find the mark
		o.flush.batches[0] = nil // the backing array outlives the slice past it
		o.flush.batches = o.flush.batches[1:]
		o.flush.mu.Lock()
		o.flush.unref(sb.refs)
		o.flush.mu.Unlock()
		o.flushNext()
	}
	if !o.markLate(settle) {
		settle(true)
	}
}

// DefaultFlushBatch is Config.FlushBatch's default. It bounds what write-behind holds
// outside the store (keys, buckets, script arguments, references) however many
// counters wait: the rest waits in the store, at its fixed cost per counter.
const DefaultFlushBatch = 8192

// drainBatch makes a batch of the next part of the queue and of the store's pass, and
// reports whether the flush has drained all it has to. The queue goes first, as it
// holds what counters had before they left memory: the store's part joins only a
// batch that takes the queue's last entry, so that a counter's newer deltas never go
// ahead of its queued ones. The drain happens under mu, with nothing between it and
// the holds its counters take: a release that finds its counters settled (release.go)
// cannot miss deltas drained and not yet counted.
func (o *Owner) drainBatch() bool {
	f := &o.flush
	f.mu.Lock()
	var ds []fallback.Delta
	most := o.cfg.FlushBatch
	if len(f.queue) <= most {
		ds, f.queue = f.queue, nil
	} else {
		ds = slices.Clone(f.queue[:most])
		f.queue = slices.Delete(f.queue, 0, most)
	}
	f.reindexQueue()
	f.queueTaken += len(ds)
	queueLeft, queueDone := len(f.queue) > 0, len(f.queue) == 0 || f.queueTaken >= f.queueDue
	f.mu.Unlock()
	clear(f.buf) // the last batch's keys and buckets: its Batch holds its own copies
	f.buf = f.buf[:0]
	storeDone := false
	if room := most - len(ds); !queueLeft && room > 0 {
		f.buf, storeDone = o.cfg.Store.DrainSome(&f.cursor, f.buf, room)
	}
	f.mu.Lock()
	// Room for the lot at once: a flood's batches are the garbage its drain makes
	// (fallback's BenchmarkNewBatch), and that garbage sets the collector's headroom.
	ds = slices.Grow(ds, len(f.buf))
	for _, d := range f.buf { // (the queued ones were counted when queued)
		fd := fallback.Delta{Key: d.Key, Spec: d.Spec, Buckets: d.Buckets, Reset: d.Reset}
		f.refs[refOf(fd)]++
		ds = append(ds, fd)
	}
	f.refsHigh = max(f.refsHigh, len(f.refs))
	f.mu.Unlock()
	if len(ds) > 0 {
		f.batches = append(f.batches, &sentBatch{b: o.cfg.Redis.NewBatch(o.cfg.Writer, ds), refs: refsOf(ds), made: o.cfg.Clock.Since(),
			newest: newestBucket(ds), losses: o.redisEpoch.losses})
	}
	return queueDone && storeDone
}

// shedAbove is the size past which a buffer or map the write-behind grew is let go once
// it is empty, rather than kept for reuse: an ordinary flush stays below it.
const shedAbove = 1024

// shed lets go of what a backlog grew, once no batch is left: Go keeps a slice's and a
// map's largest size, and a flood's would stay in RSS long after it drained and expired
// (issue 49). The caller holds Owner.mu.
func (f *flusher) shed() {
	if cap(f.buf) > shedAbove {
		f.buf = nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 && cap(f.queue) > shedAbove {
		f.queue = nil
	}
	if len(f.queue) == 0 && len(f.queued) == 0 && f.queuedHigh > shedAbove {
		f.queued, f.queuedHigh = map[fallback.CounterRef]int{}, 0
	}
	if len(f.refs) == 0 && f.refsHigh > shedAbove {
		f.refs, f.refsHigh = map[fallback.CounterRef]int{}, 0
	}
}

// newestBucket is the start (ms) of the newest bucket among ds (0: none).
func newestBucket(ds []fallback.Delta) int64 {
	var out int64
	for _, d := range ds {
		for _, b := range d.Buckets {
			out = max(out, b.Index*d.Spec.BucketMs())
		}
	}
	return out
}

// flushEnd ends the flush in flight, tells those waiting for it, and starts the next
// one if it was asked for. The caller holds mu.
func (o *Owner) flushEnd() {
	f := &o.flush
	f.inFlight = false
	if len(f.batches) == 0 {
		f.shed()
	}
	f.inDoubt.Store(slices.ContainsFunc(f.batches, func(sb *sentBatch) bool { return sb.b.InDoubt() }))
	f.rounds.Add(1)
	o.flushEnded()
	o.stepReleases()
	if f.again {
		o.flushStart()
	}
}

// flushFailed ends a flush that Redis did not complete, and puts the next off: by
// FlushInterval, doubling with each failure in a row up to maxFlushBackoff. The caller
// holds mu.
func (o *Owner) flushFailed() {
	f := &o.flush
	f.failed.Add(1)
	f.failures++
	wait := o.cfg.FlushInterval << min(f.failures-1, 10)
	f.retryAt = o.cfg.Clock.Since() + min(wait, maxFlushBackoff)
	o.flushEnd()
}

// maxFlushBackoff bounds the wait before a flush after failed ones: once Redis is back,
// what waits for it resumes within this.
const maxFlushBackoff = 250 * time.Millisecond

// flushEnded calls what waits for a flush to end, on another goroutine or event: the
// caller holds mu, which the waiters may take.
func (o *Owner) flushEnded() {
	f := &o.flush
	f.mu.Lock()
	ws := f.settleWaiters
	f.settleWaiters = nil
	f.mu.Unlock()
	if len(ws) > 0 {
		o.cfg.Clock.AfterFunc(0, func() {
			for _, w := range ws {
				w()
			}
		})
	}
}
