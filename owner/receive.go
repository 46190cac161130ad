package owner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/rpc"
)

// received is the receiving side's memory of Handoffs applied, so that a Handoff sent
// again (its answer was lost) is applied once; and the sending side's id source.
type received struct {
	nextID atomic.Uint64
	// applying is held while a Handoff is checked, applied and recorded: the rpc
	// server applies each Handoff frame in its own goroutine, and a retry can arrive
	// while its first send is still being applied; checked and applied apart, both
	// would be applied (TestConcurrentDuplicateHandoffAppliesOnce). Handoffs are few.
	applying sync.Mutex
	mu       sync.Mutex
	applied  map[appliedID]time.Time
}

type appliedID struct {
	from string
	id   uint64
}

// appliedFor is how long an applied Handoff's id is remembered: longer than a sender
// retries one whose outcome it does not know (deliver).
const appliedFor = 10 * time.Minute

func (r *received) init() {
	r.applied = map[appliedID]time.Time{}
	r.nextID.Store(uint64(time.Now().UnixNano())) // unique per run: a restarted sender never reuses an id
}

func (r *received) seen(id appliedID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.applied[id]
	return ok
}

func (r *received) record(id appliedID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.applied[id] = now
	for k, at := range r.applied {
		if now.Sub(at) > appliedFor {
			delete(r.applied, k)
		}
	}
}

// Handoff applies a Handoff from a node that hands counters on to this one: it takes
// them into memory (with Redis, with their part not yet in Redis to write behind). It
// refuses, applying nothing, when a counter's partition is not this node's in its ring
// (rpc.ErrHandoffNotOwner: the sender sends it where it belongs). A Handoff already
// applied is acknowledged and not applied again. The partitions it names were released
// by the sender, so this node asks for their leases at once.
func (o *Owner) Handoff(_ context.Context, h *rpc.Handoff) error {
	id := appliedID{h.From, h.ID}
	o.recv.applying.Lock()
	defer o.recv.applying.Unlock()
	if o.recv.seen(id) {
		return nil
	}
	if len(h.Counters) > 0 {
		if err := o.takeIn(h); err != nil {
			return err
		}
	}
	o.recv.record(id)
	if len(h.Partitions) > 0 {
		o.returned(h.Partitions)
		o.cfg.Leases.Kick()
	}
	return nil
}

// takeIn installs a Handoff's counters, all or none, while no partition changes state.
func (o *Owner) takeIn(h *rpc.Handoff) error {
	o.decide.RLock()
	defer o.decide.RUnlock()
	rg := o.ring.Load()
	if rg == nil {
		return fmt.Errorf("%w: this node has no ring yet", rpc.ErrHandoffNotOwner)
	}
	specs := make([]leaparray.Spec, len(h.Counters))
	for i := range h.Counters {
		p := rg.Partition(h.Counters[i].Key)
		if st := o.parts.get(p); st != stMine && st != stStale && st != stLent {
			return fmt.Errorf("%w: partition %d is not this node's", rpc.ErrHandoffNotOwner, p)
		}
		specs[i] = h.Counters[i].Spec
	}
	// Handed-over counters are taken past the store's bounds, which a client's new
	// counters respect, but not past twice them: the sender keeps what is refused and
	// sends it again, so nothing is lost while it runs.
	if err := o.cfg.Store.Admits(specs); err != nil {
		o.cfg.Logger.Warn("handoff refused: memory holds twice its bound; the sender keeps the counters and tries again",
			"from", h.From, "counters", len(h.Counters), "err", err)
		return fmt.Errorf("%w: this node is full: %v", rpc.ErrHandoffRefused, err)
	}
	for i := range h.Counters {
		o.installCounter(&h.Counters[i])
	}
	if o.cfg.Redis == nil {
		return nil
	}
	ps := append([]int(nil), h.Partitions...)
	for i := range h.Counters {
		p := rg.Partition(h.Counters[i].Key)
		ps = append(ps, p)
		o.parts.decided[p].forget() // memory came from elsewhere: no load skip for a window (fresh.go)
		o.refreshKeys.mark(p, h.Counters[i].Key, false)
	}
	o.fenced.add(ps, h.Fences)
	return nil
}

// installCounter takes a counter handed on into memory. Without Redis its buckets are
// added (each node's memory is what it counted; the sum is the count). With Redis, a
// counter not in memory is created from the state it arrived with, whose pending part
// this node writes behind; a counter already in memory was loaded from Redis, which has
// all but the pending part, so only that is added.
func (o *Owner) installCounter(c *rpc.HandoffCounter) {
	st := o.cfg.Store
	if o.cfg.Redis == nil {
		st.Merge(c.Key, c.Spec, c.Buckets)
		return
	}
	if !st.Has(c.Key, c.Spec) {
		st.Seed(c.Key, c.Spec, c.Buckets)
		if !st.Has(c.Key, c.Spec) {
			// Nothing left in its window: only what it owes Redis (a reset) remains.
			if c.Reset || len(c.Pending) > 0 {
				o.flush.enqueue([]fallback.Delta{{Key: c.Key, Spec: c.Spec, Buckets: c.Pending, Reset: c.Reset}})
			}
			return
		}
	} else {
		st.Merge(c.Key, c.Spec, c.Pending)
	}
	st.AddPending(c.Key, c.Spec, c.Pending, c.Reset)
}
