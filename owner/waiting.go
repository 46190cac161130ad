package owner

import (
	"container/heap"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/lockrank"
)

// Bounds on the requests waiting for their partitions. Past either, a request that
// would wait is answered at once: its ops that wait get counter.ErrUnavailable
// ("ownership ... is moving"), certainly not applied.
const (
	maxParkedPerPartition = 4096    // requests waiting for one partition
	maxParked             = 1 << 18 // requests waiting on this node
)

// waiters are the requests waiting for their partitions. Each waits under the first
// partition it waits for, and is tried again when a wake finds that partition no
// longer to be waited for (or finds this node cut off from a majority, which ends every
// wait), or when its wait runs out. So a wake costs one judge per partition that has
// requests waiting, and one attempt per request it wakes: not one per request waiting.
// The ends of the waits are kept in a heap under one timer, and nothing waits on a
// goroutine.
type waiters struct {
	mu      lockrank.Mutex[lockrank.OwnerWaiting]
	seq     uint64      // wakes so far
	parts   []parkedOn  // by partition
	marked  []uint64    // bit p: parts[p] has requests waiting (walked in order: a simulation replays)
	total   int         // requests waiting
	ends    endHeap     // every request that waited and is not answered, by the end of its wait
	timer   func() bool // stops the timer set for ends[0], nil when none is set
	timerAt time.Duration

	deferred []*request  // requests that found decide held exclusively (start)
	draining atomic.Bool // a drain of deferred is scheduled
}

// parkedOn are the requests waiting for one partition, in the order they came. An
// entry whose gen is no longer its request's (it ended its wait since) is skipped.
type parkedOn struct {
	reqs []parkedReq
	live int
}

type parkedReq struct {
	r   *request
	gen uint32
}

// parkResult is what park did.
type parkResult uint8

const (
	parked      parkResult = iota // r waits
	wokenSince                    // a wake came since seq: judge again
	waitersFull                   // too many requests wait: r must not
)

// seen is the wakes so far: a request that judged its partitions after reading it and
// parks after a wake came in between is tried again at once (that wake found it not
// parked yet).
func (w *waiters) seen() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// park makes r wait for partition p (of n), unless a wake came since seq or the bounds
// are reached. The first time r waits, its end joins the heap.
func (w *waiters) park(o *Owner, r *request, p, n int, seq uint64) parkResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seq != seq {
		return wokenSince
	}
	if len(w.parts) < n {
		w.parts = append(w.parts, make([]parkedOn, n-len(w.parts))...)
		w.marked = append(w.marked, make([]uint64, (n+63)/64-len(w.marked))...)
	}
	pk := &w.parts[p]
	if pk.live >= maxParkedPerPartition || w.total >= maxParked {
		return waitersFull
	}
	r.state, r.part = reqWaiting, p
	r.gen++
	pk.reqs = append(pk.reqs, parkedReq{r, r.gen})
	pk.live++
	w.total++
	w.marked[p/64] |= 1 << (p % 64)
	if r.endAt < 0 {
		heap.Push(&w.ends, r)
		w.arm(o)
	}
	return parked
}

// unpark takes r, waiting, out of its partition's list; w.mu is held.
func (w *waiters) unpark(r *request) {
	r.state = reqRunning
	pk := &w.parts[r.part]
	pk.live--
	w.total--
	switch {
	case pk.live == 0:
		w.clearPart(r.part)
	case len(pk.reqs) > 2*pk.live+16:
		// Mostly ended waits: keep the list in proportion to those still waiting.
		kept := pk.reqs[:0]
		for _, e := range pk.reqs {
			if e.r.state == reqWaiting && e.r.gen == e.gen {
				kept = append(kept, e)
			}
		}
		clear(pk.reqs[len(kept):])
		pk.reqs = kept
	}
}

// take appends the requests waiting for p to list and ends their wait; w.mu is held.
func (w *waiters) take(p int, list []*request) []*request {
	pk := &w.parts[p]
	for _, e := range pk.reqs {
		if e.r.state == reqWaiting && e.r.gen == e.gen {
			e.r.state = reqRunning
			list = append(list, e.r)
		}
	}
	w.total -= pk.live
	w.clearPart(p)
	return list
}

func (w *waiters) clearPart(p int) {
	pk := &w.parts[p]
	clear(pk.reqs)
	pk.reqs, pk.live = pk.reqs[:0], 0
	if cap(pk.reqs) > 64 {
		pk.reqs = nil // a burst's memory goes with it
	}
	w.marked[p/64] &^= 1 << (p % 64)
}

// waitedFor returns the partitions that have requests waiting, in order; w.mu is held.
func (w *waiters) waitedFor() []int {
	var ps []int
	for i, word := range w.marked {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			ps = append(ps, i*64+b)
			word &^= 1 << b
		}
	}
	return ps
}

// end marks r done and reports whether it was not already; its end leaves the heap.
func (w *waiters) end(r *request) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.state == reqDone {
		return false
	}
	if r.state == reqWaiting {
		w.unpark(r)
	}
	r.state = reqDone
	if r.endAt >= 0 {
		heap.Remove(&w.ends, r.endAt)
	}
	return true
}

// arm sets the timer for the earliest end, unless one is set for it already; w.mu is
// held.
func (w *waiters) arm(o *Owner) {
	if len(w.ends) == 0 {
		return // a timer set fires, finds nothing due, and is not set again
	}
	at := w.ends[0].until
	if w.timer != nil && w.timerAt <= at {
		return
	}
	if w.timer != nil {
		w.timer()
	}
	w.timerAt = at
	w.timer = o.cfg.Clock.AfterFunc(max(at-o.cfg.Clock.Since(), 0), o.endWaits)
}

// wake tries again the requests waiting for partitions no longer to be waited for
// (every one, when this node reaches no majority: they are refused then), and those
// that found decide held exclusively.
func (o *Owner) wake() {
	w := &o.waiting
	w.mu.Lock()
	w.seq++
	if w.total == 0 && len(w.deferred) == 0 {
		w.mu.Unlock()
		return
	}
	ps := w.waitedFor()
	deferred := w.deferred
	w.deferred = nil
	w.mu.Unlock()
	// Judged outside w.mu: a request that parks meanwhile read seq before this wake,
	// and judges again (park refuses it), or after, and judged after the change.
	now, up := o.cfg.Clock.Since(), o.redisUp()
	all := !o.cfg.Leases.Quorate(now)
	ready := ps[:0]
	for _, p := range ps {
		if all || o.judge(p, now, up) != waitFor {
			ready = append(ready, p)
		}
	}
	w.mu.Lock()
	list := deferred
	for _, p := range ready {
		list = w.take(p, list)
	}
	w.mu.Unlock()
	for _, r := range list {
		o.attempt(r)
	}
}

// endWaits ends the waits that ran out: they are decided, or refused, now.
func (o *Owner) endWaits() {
	w := &o.waiting
	w.mu.Lock()
	w.timer = nil
	now := o.cfg.Clock.Since()
	var due []*request
	for len(w.ends) > 0 && w.ends[0].until <= now {
		r := heap.Pop(&w.ends).(*request)
		if r.state == reqWaiting {
			w.unpark(r)
			r.noWait = true
			due = append(due, r)
		}
		// A request running now judges its wait over by itself (mayWait).
	}
	w.arm(o)
	w.mu.Unlock()
	for _, r := range due {
		o.attempt(r)
	}
}

// deferAttempt keeps r, which found decide held exclusively, for whoever lets it go
// (unlockDecide) or the next wake: an event loop must not wait for the lock, and a
// goroutine per request would cost one each.
func (o *Owner) deferAttempt(r *request) {
	w := &o.waiting
	w.mu.Lock()
	w.deferred = append(w.deferred, r)
	w.mu.Unlock()
	// Whoever held decide may have let go before r was listed: then nobody else will look.
	o.attemptDeferred()
}

// attemptDeferred attempts the deferred requests while decide can be had at once.
func (o *Owner) attemptDeferred() {
	w := &o.waiting
	for {
		seq := w.seen()
		if !o.decide.TryRLock() {
			return // whoever holds it comes back here in unlockDecide
		}
		w.mu.Lock()
		n := len(w.deferred)
		var r *request
		if n > 0 {
			r = w.deferred[n-1]
			w.deferred[n-1] = nil
			w.deferred = w.deferred[:n-1]
		}
		w.mu.Unlock()
		if r == nil {
			o.decide.RUnlock()
			return
		}
		o.attemptLocked(r, seq)
	}
}

// unlockDecide lets go of decide held exclusively, and has the requests that found it
// held attempted soon: its callers hold mu, which an attempt must not run under.
func (o *Owner) unlockDecide() {
	o.decide.Unlock()
	w := &o.waiting
	w.mu.Lock()
	some := len(w.deferred) > 0
	w.mu.Unlock()
	if some && w.draining.CompareAndSwap(false, true) {
		o.cfg.Clock.AfterFunc(0, func() {
			w.draining.Store(false)
			o.attemptDeferred()
		})
	}
}

// endHeap orders requests by the end of their wait (container/heap); each keeps its
// index in endAt.
type endHeap []*request

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].until < h[j].until }
func (h endHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].endAt, h[j].endAt = i, j
}
func (h *endHeap) Push(x any) {
	r := x.(*request)
	r.endAt = len(*h)
	*h = append(*h, r)
}
func (h *endHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.endAt = -1
	return r
}
