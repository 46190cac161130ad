package owner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/backoff"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

// persistWait bounds how long a release waits for Redis to confirm the released
// counters' deltas before it hands the counters to their new owner directly.
const persistWait = 2 * time.Second

// release hands on partitions this node no longer owns: their counters leave memory
// (no op is decided on them any more), and either their deltas are confirmed in Redis
// (the new owner loads them from there), or, without Redis or with Redis down, the
// counters go to the new owner in Handoffs. The partitions stay claimed until then, so
// the new owner cannot be granted them before it can see their counts.
func (o *Owner) release(ps []int) {
	defer o.releases.Done()
	ctx := o.stopped
	rg := o.ring.Load()
	set := lease.NewSet(rg.PartitionCount())
	for _, p := range ps {
		set.Add(p)
	}
	ev := o.cfg.Store.Evict(func(k string) bool { return set.Has(rg.Partition(k)) })
	if o.cfg.Redis != nil && o.persisted(ctx, ev, rg, set, ps) {
		o.hint(ctx, ps)
		o.finish(ps, nil)
		o.cfg.Logger.Info("released partitions through Redis", "partitions", len(ps), "counters", len(ev))
		return
	}
	var fs []rpc.HandoffFence
	if o.cfg.Redis != nil {
		ev = o.withUnsent(ev, rg, set)
		fs = append(o.ownFences(rg, set), o.fenced.of(ps, true)...)
	}
	o.handOn(ctx, rg, ps, ev, fs)
}

// persisted writes the evicted counters' deltas behind and reports whether Redis
// confirmed every delta of the released partitions in time: theirs, those of counters
// of those partitions that left memory earlier (a lapse, a reload) and are still on
// their way, and those of other nodes that their counters here wait for (fences).
func (o *Owner) persisted(ctx context.Context, ev []leaparray.Evicted, rg *ring.Ring, set lease.Set, ps []int) bool {
	o.flush.enqueue(pendingOf(ev))
	ctx, cancel := context.WithTimeout(ctx, persistWait)
	defer cancel()
	if !o.waitSettled(ctx, o.flush.unsettledIn(rg, set)) {
		return false
	}
	for !o.allReached(ctx, ps) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(fencePoll):
		}
	}
	return true
}

// fencePoll is how often a release waiting for fences asks Redis again.
const fencePoll = 50 * time.Millisecond

// withUnsent takes back from the write-behind what the released partitions' counters
// had not sent, to travel with them as their pending part; counters no longer in
// memory travel with that part alone.
func (o *Owner) withUnsent(ev []leaparray.Evicted, rg *ring.Ring, set lease.Set) []leaparray.Evicted {
	unsent := o.takeUnsent(o.flush.unsettledIn(rg, set))
	for i := range ev {
		ref := fallback.CounterRef{Key: ev[i].Key, Spec: ev[i].Spec}
		ev[i].Pending, ev[i].Reset = combine(unsent[ref])
		delete(unsent, ref)
	}
	for ref, ds := range unsent {
		e := leaparray.Evicted{Key: ref.Key, Spec: ref.Spec}
		e.Pending, e.Reset = combine(ds)
		ev = append(ev, e)
	}
	return ev
}

// combine folds a counter's deltas, oldest first, into one: a reset drops what came
// before it.
func combine(ds []fallback.Delta) ([]leaparray.Bucket, bool) {
	var out []leaparray.Bucket
	reset := false
	for _, d := range ds {
		if d.Reset {
			out, reset = nil, true
		}
		out = addBuckets(out, d.Buckets)
	}
	return out, reset
}

func addBuckets(dst, src []leaparray.Bucket) []leaparray.Bucket {
next:
	for _, b := range src {
		for i := range dst {
			if dst[i].Index == b.Index {
				dst[i].Count += b.Count
				continue next
			}
		}
		dst = append(dst, b)
	}
	return dst
}

// hint tells each new owner that its partitions were released, so that it asks for
// their leases at once rather than at its next heartbeat. Best effort.
func (o *Owner) hint(ctx context.Context, ps []int) {
	rg := o.ring.Load()
	for m, parts := range byOwner(rg, ps) {
		h := &rpc.Handoff{From: o.cfg.Self, ID: o.recv.nextID.Add(1), Partitions: parts}
		if err := o.cfg.Sender.Handoff(ctx, m.RPCAddr, h); err != nil {
			o.cfg.Logger.Debug("release hint not delivered", "to", m.Name, "err", err)
		}
	}
}

func byOwner(rg *ring.Ring, ps []int) map[ring.Member][]int {
	out := map[ring.Member][]int{}
	for _, p := range ps {
		if m, ok := rg.PartitionOwner(p); ok {
			out[m] = append(out[m], p)
		}
	}
	return out
}

// handOn sends the counters of partitions ps to their owners in the ring in use, again
// and again (the ring may move them meanwhile; an owner may refuse a partition it does
// not own yet) until all are delivered or ctx ends. Partitions the ring gives back to
// this node take their counters back into memory.
func (o *Owner) handOn(ctx context.Context, from *ring.Ring, ps []int, ev []leaparray.Evicted, fs []rpc.HandoffFence) {
	byPart := map[int][]rpc.HandoffCounter{}
	for _, e := range ev {
		p := from.Partition(e.Key)
		byPart[p] = append(byPart[p], rpc.HandoffCounter{Key: e.Key, Spec: e.Spec, Buckets: e.Buckets, Pending: e.Pending, Reset: e.Reset})
	}
	lentTo := map[int]string{} // where counters of a partition went: lent, should it come back
	left := append([]int(nil), ps...)
	retry := backoff.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	for wait := retry.Next(0); ; wait = retry.Next(wait) {
		ch := o.parts.changed.Load()
		left = o.reclaim(left, byPart, lentTo, fs)
		for _, parts := range o.sendAll(ctx, byOwner(o.ring.Load(), left), byPart, lentTo, fs) {
			left = remove(left, parts)
		}
		if len(left) == 0 {
			o.cfg.Logger.Info("handed partitions on directly", "partitions", len(ps), "counters", len(ev))
			return
		}
		select {
		case <-*ch:
		case <-time.After(wait):
		case <-ctx.Done():
			n := 0
			for _, p := range left {
				n += len(byPart[p])
			}
			o.cfg.Logger.Error("handoff gave up: these counters are lost", "partitions", len(left), "counters", n, "err", ctx.Err())
			o.finish(left, nil)
			return
		}
	}
}

// reclaim takes back into memory the partitions of left that the ring gives back to
// this node (lent, if some of their counters went elsewhere), and returns the others.
func (o *Owner) reclaim(left []int, byPart map[int][]rpc.HandoffCounter, lentTo map[int]string, fs []rpc.HandoffFence) []int {
	o.parts.mu.Lock()
	defer o.parts.mu.Unlock()
	var rest []int
	for _, p := range left {
		if !o.owns(p) {
			rest = append(rest, p)
			continue
		}
		for _, c := range byPart[p] {
			o.installCounter(&c)
		}
		o.fenced.add([]int{p}, fs)
		o.decide.Lock()
		o.lendOrOwn(p, lentTo)
		o.decide.Unlock()
	}
	if len(rest) != len(left) {
		o.parts.signal()
	}
	return rest
}

// sendAll delivers each owner's partitions (sendCounters) to all owners at once,
// finishes (finish) each owner's as soon as they are delivered, and returns the
// partition lists delivered. Concurrently, because a Handoff in doubt goes again to its
// receiver only until that one answers (deliver): a receiver cut off holds up its own
// partitions, not those on their way to the others. Each owner's send works on its own
// partitions' entries, copied out of byPart and lentTo and back after.
func (o *Owner) sendAll(ctx context.Context, to map[ring.Member][]int, byPart map[int][]rpc.HandoffCounter, lentTo map[int]string, fs []rpc.HandoffFence) [][]int {
	type send struct {
		m      ring.Member
		parts  []int
		byPart map[int][]rpc.HandoffCounter
		lentTo map[int]string
		err    error
	}
	sends := make([]*send, 0, len(to))
	var wg sync.WaitGroup
	for m, parts := range to {
		s := &send{m: m, parts: parts, byPart: make(map[int][]rpc.HandoffCounter, len(parts)), lentTo: map[int]string{}}
		for _, p := range parts {
			s.byPart[p] = byPart[p]
			if to, ok := lentTo[p]; ok {
				s.lentTo[p] = to // counters it sent earlier, elsewhere: finish must know
			}
		}
		sends = append(sends, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.err = o.sendCounters(ctx, s.m, s.parts, s.byPart, s.lentTo, fs); s.err == nil {
				o.finish(s.parts, s.lentTo)
			}
		}()
	}
	wg.Wait()
	var done [][]int
	for _, s := range sends {
		maps.Copy(byPart, s.byPart)
		maps.Copy(lentTo, s.lentTo)
		if s.err != nil {
			o.cfg.Logger.Debug("handoff not delivered yet", "to", s.m.Name, "partitions", len(s.parts), "err", s.err)
			continue
		}
		done = append(done, s.parts)
	}
	return done
}

// sendCounters delivers the counters of parts to m in chunks of at most
// rpc.MaxHandoffBytes, naming the partitions in the last. A chunk m did not answer is
// sent again, with its ID (applied once), to m only: it may have been applied there. A
// chunk m refused (not its partitions yet) may go elsewhere later. Delivered counters
// leave byPart, and lentTo records that their partitions' counters went to m.
func (o *Owner) sendCounters(ctx context.Context, m ring.Member, parts []int, byPart map[int][]rpc.HandoffCounter, lentTo map[int]string, fs []rpc.HandoffFence) error {
	var cs []rpc.HandoffCounter
	for _, p := range parts {
		cs = append(cs, byPart[p]...)
	}
	sent := 0
	defer func() { dropSent(parts, byPart, sent, m.Name, lentTo) }()
	for {
		n, size := 0, 0
		for rest := cs[sent:]; n < len(rest) && (n == 0 || size+rpc.HandoffSize(&rest[n]) <= rpc.MaxHandoffBytes/2); n++ {
			size += rpc.HandoffSize(&rest[n])
		}
		h := &rpc.Handoff{From: o.cfg.Self, ID: o.recv.nextID.Add(1), Counters: cs[sent : sent+n], Fences: fs}
		if sent+n == len(cs) {
			h.Partitions = parts
		}
		if err := o.deliver(ctx, m, h); err != nil {
			return err
		}
		if sent += n; sent == len(cs) {
			return nil
		}
	}
}

// dropSent removes from byPart the first sent counters of parts, in order: those
// delivered to the node named to, as lentTo records.
func dropSent(parts []int, byPart map[int][]rpc.HandoffCounter, sent int, to string, lentTo map[int]string) {
	for _, p := range parts {
		k := min(sent, len(byPart[p]))
		if k > 0 {
			lentTo[p] = to
		}
		byPart[p] = byPart[p][k:]
		sent -= k
	}
}

// deliver sends one Handoff to m until its outcome is known: applied (nil), or
// certainly not applied (refused, or never sent: the error). Once a send's outcome is
// unknown (it went out and no answer came), a later send that fails unsent says nothing
// of the first, which may have been applied: the Handoff goes again, to m only, until m
// answers (a receiver checks a Handoff's ID before it refuses one, so a refusal then is
// an answer too). Giving up there would send its counters again in a new Handoff, or
// take them back, and count them twice (TestHandoffInDoubtStaysInDoubtThroughUnreachable).
//
// It is given up on (an error: its counters go where the ring says) only once m has been
// out of the ring for goneAfter, or after appliedFor/2 (the receiver would no longer know
// its ID): a node gone that long has most likely crashed, and its memory with what it
// applied, whereas waiting longer keeps its partitions from being decided anywhere.
func (o *Owner) deliver(ctx context.Context, m ring.Member, h *rpc.Handoff) error {
	ctx, cancel := context.WithTimeout(ctx, appliedFor/2)
	defer cancel()
	retry := backoff.Policy{Initial: 20 * time.Millisecond, Max: time.Second}
	inDoubt := false
	var outSince time.Time // when m was first seen out of the ring while in doubt
	for wait := retry.Next(0); ; wait = retry.Next(wait) {
		err := o.cfg.Sender.Handoff(ctx, m.RPCAddr, h)
		switch {
		case err == nil || errors.Is(err, rpc.ErrHandoffRefused):
			return err
		case errors.Is(err, rpc.ErrPeerUnreachable) && !inDoubt:
			return err
		case !errors.Is(err, rpc.ErrPeerUnreachable):
			inDoubt = true
		}
		if _, in := o.ring.Load().Member(m.Name); in {
			outSince = time.Time{}
		} else if outSince.IsZero() {
			outSince = time.Now()
		} else if time.Since(outSince) > goneAfter {
			o.cfg.Logger.Warn("handoff in doubt to a node out of the ring: its counters go where the ring says (counted twice should that node come back having applied it)",
				"to", m.Name, "id", h.ID, "counters", len(h.Counters))
			return fmt.Errorf("handoff %d to %s: outcome unknown, and %s is out of the ring: %w", h.ID, m.Name, m.Name, err)
		}
		select { // the outcome is unknown: only sending it again, to m, can tell
		case <-ctx.Done():
			return fmt.Errorf("handoff %d to %s: outcome unknown: %w", h.ID, m.RPCAddr, err)
		case <-time.After(wait):
		}
	}
}

// goneAfter is how long a node out of the ring is waited for when a Handoff to it is in
// doubt: as long as a lent partition waits for its counters (lend.go). A variable for
// tests.
var goneAfter = lentMax

func remove(from, drop []int) []int {
	out := from[:0]
	for _, p := range from {
		if !containsInt(drop, p) {
			out = append(out, p)
		}
	}
	return out
}

// finish marks partitions a release has dealt with: this node's if the ring gives them
// back (lent, if their counters went to another node, which hands them back in turn:
// lentTo), else idle. Their claims follow.
func (o *Owner) finish(ps []int, lentTo map[int]string) {
	o.parts.mu.Lock()
	defer o.parts.mu.Unlock()
	o.decide.Lock()
	for _, p := range ps {
		if o.owns(p) {
			o.lendOrOwn(p, lentTo)
		} else {
			o.parts.set(p, stIdle)
		}
	}
	o.decide.Unlock()
	o.cfg.Leases.SetClaims(o.parts.claims())
	o.parts.signal()
}

// WaitReleased waits until every release started so far is done (or ctx ends).
func (o *Owner) WaitReleased(ctx context.Context) error {
	done := make(chan struct{})
	go func() { o.releases.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
