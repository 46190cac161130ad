package owner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

// handoffChunk is how many counters one Handoff carries without Redis.
const handoffChunk = 5000

// handoffs is the sending side's state: releases in progress, and ids of Handoffs
// already applied on the receiving side.
type handoffs struct {
	nextID   atomic.Uint64
	inflight sync.WaitGroup
	mu       sync.Mutex
	applied  map[appliedID]time.Time
}

type appliedID struct {
	from string
	id   uint64
}

func (h *handoffs) init(cfg Config) {
	h.applied = map[appliedID]time.Time{}
	h.nextID.Store(uint64(time.Now().UnixNano())) // unique per run: a restarted sender never reuses an id
}

// RingChanged is told every new ring. Partitions it gained from a node that is still
// up (alive or leaving, says up) wait for that node's Handoff; partitions it lost are
// released in the background: their counters leave memory, their deltas are written,
// and the new owners are told.
func (o *Owner) RingChanged(prev, next *ring.Ring, up func(name string) bool) {
	o.gate.partitions.Store(int64(next.PartitionCount()))
	o.ring.Store(next)
	if prev == nil {
		// This node's first ring: it has just joined (or restarted into) a cluster whose
		// partitions were placed on the others, who hand them over.
		prev = ring.New(othersThan(next.Members(), o.cfg.Self), next.Config())
	}
	lost := map[ring.Member][]int{}
	for p := 0; p < next.PartitionCount(); p++ {
		now, ok := next.PartitionOwner(p)
		var was ring.Member
		var had bool
		if prev != nil {
			was, had = prev.PartitionOwner(p)
		}
		switch {
		case had && was.Name == o.cfg.Self && (!ok || now.Name != o.cfg.Self):
			if ok {
				lost[now] = append(lost[now], p)
			}
		case ok && now.Name == o.cfg.Self && had && was.Name != o.cfg.Self && up(was.Name):
			o.gate.expect(p, was.Name, o.cfg.HandoffWait)
		}
	}
	if len(lost) > 0 {
		o.hand.inflight.Add(1)
		go func() {
			defer o.hand.inflight.Done()
			o.release(lost, next)
		}()
	}
}

func othersThan(ms []ring.Member, self string) []ring.Member {
	out := ms[:0:0]
	for _, m := range ms {
		if m.Name != self {
			out = append(out, m)
		}
	}
	return out
}

// WaitReleased waits until every release started so far has been sent (or ctx ends).
func (o *Owner) WaitReleased(ctx context.Context) error {
	done := make(chan struct{})
	go func() { o.hand.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release takes the lost partitions' counters out of memory, writes their deltas (with
// Redis), and sends each new owner its Handoff (carrying the counters without Redis).
func (o *Owner) release(lost map[ring.Member][]int, next *ring.Ring) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner := map[int]ring.Member{}
	for m, ps := range lost {
		for _, p := range ps {
			owner[p] = m
		}
	}
	ev := o.evict(func(k string) bool { _, ok := owner[next.Partition(k)]; return ok })
	if o.cfg.Redis != nil {
		o.writes.Lock() // after a regular flush in flight, which may hold these counters' deltas
		o.writeAll(ctx, pendingOf(ev))
		o.writes.Unlock()
		o.load.Unlock()
		ev = nil // state travels through Redis
	}
	byOwner := map[ring.Member][]rpc.HandoffCounter{}
	for _, e := range ev {
		m := owner[next.Partition(e.Key)]
		byOwner[m] = append(byOwner[m], rpc.HandoffCounter{Key: e.Key, Spec: e.Spec, Buckets: e.Buckets})
	}
	for m, ps := range lost {
		if err := o.send(ctx, m, next.Epoch(), ps, byOwner[m]); err != nil {
			o.cfg.Logger.Warn("handoff not delivered; the new owner will stop waiting after its timeout",
				"to", m.Name, "partitions", len(ps), "counters", len(byOwner[m]), "err", err)
		}
	}
	o.cfg.Logger.Info("released partitions", "partitions", len(owner), "counters_moved", len(ev))
}

// send delivers counters in chunks and names the partitions in the last one. Each chunk
// is retried a few times; its id makes a retry count once.
func (o *Owner) send(ctx context.Context, to ring.Member, epoch uint64, ps []int, cs []rpc.HandoffCounter) error {
	for {
		n := min(len(cs), handoffChunk)
		h := &rpc.Handoff{From: o.cfg.Self, ID: o.hand.nextID.Add(1), Epoch: epoch, Counters: cs[:n]}
		cs = cs[n:]
		if len(cs) == 0 {
			h.Partitions = ps
		}
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if err = o.cfg.Sender.Handoff(ctx, to.RPCAddr, h); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
			}
		}
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			return nil
		}
	}
}

// Handoff applies a Handoff from an old owner: its counters are merged (added per bucket)
// and its partitions stop waiting. An id already applied is acknowledged and ignored.
func (o *Owner) Handoff(_ context.Context, h *rpc.Handoff) error {
	id := appliedID{h.From, h.ID}
	o.hand.mu.Lock()
	_, seen := o.hand.applied[id]
	if !seen {
		o.hand.applied[id] = time.Now()
		for k, at := range o.hand.applied {
			if time.Since(at) > 10*time.Minute {
				delete(o.hand.applied, k)
			}
		}
	}
	o.hand.mu.Unlock()
	if seen {
		return nil
	}
	if len(h.Counters) > 0 && o.cfg.Redis != nil {
		return fmt.Errorf("counters in a handoff, but this node persists to Redis")
	}
	if len(h.Counters) > 0 {
		o.decide.RLock()
		for _, c := range h.Counters {
			o.cfg.Store.Merge(c.Key, c.Spec, c.Buckets)
		}
		o.decide.RUnlock()
	}
	for _, p := range h.Partitions {
		o.gate.released(p, h.From)
	}
	return nil
}

// Forget drops every counter from memory, after writing what they had not persisted, so
// that each is loaded from Redis again. A node calls it when it learns it was suspected
// or declared dead: others may have decided its counters meanwhile. Without Redis there
// is nothing to reload from, and Handoffs from the interim owners add their counts, so
// Forget does nothing.
func (o *Owner) Forget() {
	if o.cfg.Redis == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev := o.evict(func(string) bool { return true })
	o.writes.Lock()
	o.writeAll(ctx, pendingOf(ev))
	o.writes.Unlock()
	o.load.Unlock()
	o.cfg.Logger.Warn("this node was suspected or declared dead: reloading its counters from Redis", "dropped", len(ev))
}
