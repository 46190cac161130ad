package owner

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

// persistWait bounds how long a release waits for Redis to confirm the released
// counters' deltas before it hands the counters to their new owner directly.
const persistWait = 2 * time.Second

// releases are the partitions being handed on: one release per ring change that took
// partitions away. Under Owner.mu.
type releases struct {
	jobs []*release
	idle chan struct{} // closed when the last job ends (WaitReleased)
}

func (rs *releases) init() {
	rs.idle = make(chan struct{})
	close(rs.idle)
}

// release hands on partitions this node no longer owns: their counters left memory
// when it began (no op is decided on them any more), and either their deltas are
// confirmed in Redis (the new owner loads them from there), or, without Redis or with
// Redis down, the counters go to the new owner in Handoffs. The partitions stay claimed
// until then, so the new owner cannot be granted them before it can see their counts.
type release struct {
	parts    []int // not yet released
	ev       []leaparray.Evicted
	persist  bool          // waiting for Redis to confirm their deltas
	until    time.Duration // persisting: when to hand them on directly instead
	checking bool          // a check of their fences, or of Redis's epoch, is under way
	epochOK  bool          // Redis's epoch read unchanged since their deltas were confirmed
	stepAt   time.Duration // when a timer steps it again (0: none armed)

	partial partialMemory            // counters whose memory lacks what Redis holds
	byPart  map[int][]HandoffCounter // handing on: the counters not delivered yet
	lentTo  map[int]string           // where counters of a partition went: lent, should it come back
	fences  []HandoffFence
	sends   map[string]*send // by receiver: at most one each
	// refused backs off, by receiver, after it refused a send (its ring or lease
	// lagging): one receiver's own, since a leaving node's many receivers each refuse
	// once or twice at first, and one backoff for all would grow to its cap at once.
	refused map[string]refusal
	count   int // counters handed on, for the log
}

// send delivers one receiver's partitions, in Handoffs of at most MaxHandoffBytes/2,
// the last naming the partitions.
type send struct {
	to       ring.Member
	parts    []int
	cs       []HandoffCounter
	done     int      // counters applied at the receiver
	h        *Handoff // the Handoff in flight, or in doubt
	n        int      // counters in h
	flying   bool
	inDoubt  bool          // h went out and no answer came: only sending it again, to the same node, can tell
	run      uint64        // the receiver's incarnation h is meant for (0: unknown)
	outSince time.Duration // in doubt: when the receiver was first seen out of the ring
	next     time.Duration // in doubt: when to send h again
	wait     time.Duration
	lapsed   lease.Set // partitions whose lease lapsed while h was out: it goes again without their resets
}

// startRelease begins the release of partitions ps, which the ring just took away.
// The caller holds mu.
func (o *Owner) startRelease(ps []int, partial partialMemory) {
	rg := o.ring.Load()
	set := setOf(rg, ps)
	rel := &release{parts: ps, partial: partial, lentTo: map[int]string{}, sends: map[string]*send{}, refused: map[string]refusal{}}
	rel.ev = o.cfg.Store.Evict(func(k string) bool { return set.Has(rg.Partition(k)) })
	if o.cfg.Redis != nil {
		o.flush.enqueue(pendingOf(rel.ev))
		rel.persist, rel.until = true, o.cfg.Clock.Since()+persistWait
		o.kick()
	} else {
		o.releaseDirectly(rel, rg)
	}
	if len(o.releases.jobs) == 0 {
		o.releases.idle = make(chan struct{})
	}
	o.releases.jobs = append(o.releases.jobs, rel)
}

func setOf(rg *ring.Ring, ps []int) lease.Set {
	s := lease.NewSet(rg.PartitionCount())
	for _, p := range ps {
		s.Add(p)
	}
	return s
}

// stepReleases moves every release on. The caller holds mu.
func (o *Owner) stepReleases() {
	for _, rel := range slices.Clone(o.releases.jobs) {
		o.stepRelease(rel)
	}
}

func (o *Owner) stepRelease(rel *release) {
	if !slices.Contains(o.releases.jobs, rel) {
		return // it ended: a timer or an answer armed before that finds nothing to do
	}
	if rel.persist {
		o.stepPersist(rel)
	}
	if !rel.persist {
		o.stepDirectRelease(rel)
	}
}

// stepPersist ends the release once Redis confirmed every delta of its partitions:
// theirs, those of their counters that left memory earlier (a lapse, a reload) and are
// still on their way, and those of other nodes that their counters here wait for
// (fences). Past persistWait it hands the counters on directly.
func (o *Owner) stepPersist(rel *release) {
	if o.takeBackPersisting(rel) {
		return
	}
	rg := o.ring.Load()
	if len(o.flush.unsettledIn(rg, setOf(rg, rel.parts))) == 0 {
		var fenced []int
		for _, p := range rel.parts {
			if o.fenced(p) {
				fenced = append(fenced, p)
			}
		}
		switch {
		case len(fenced) > 0 && !rel.checking:
			o.checkFences(rel, fenced)
		case len(fenced) > 0 || rel.checking:
		case !rel.epochOK:
			// Redis may have lost its data since: then its counts are to be written
			// again (writeback.go) before the new owner loads them from there.
			rel.checking = true
			o.checkEpoch(func(kept bool) {
				rel.checking, rel.epochOK = false, kept
				o.stepRelease(rel)
			})
		default:
			o.persisted(rel)
			return
		}
	} else {
		rel.epochOK = false
		o.kick() // a flush, soon
	}
	if o.cfg.Clock.Since() < rel.until || o.flush.inFlight {
		o.stepLater(rel, fencePoll) // (a flush in flight changes what is unsent: wait for its end)
		return
	}
	rel.ev = withHeld(o.withUnsent(rel.ev, rg, setOf(rg, rel.parts)), o.heldOf(rel.parts))
	reset := map[fallback.CounterRef]bool{}
	for _, e := range rel.ev {
		if e.Reset {
			reset[fallback.CounterRef{Key: e.Key, Spec: e.Spec}] = true
		}
	}
	rel.fences = append(o.ownFences(rg, setOf(rg, rel.parts), rel.partial, reset), o.fencesOf(rel.parts, true)...)
	rel.persist = false
	o.releaseDirectly(rel, rg)
}

// takeBackPersisting ends the release of the partitions the ring gave back while their
// deltas were on their way to Redis: their counters go back into memory as they left
// (their pending parts stay queued for Redis), and the partitions are decided here
// again at once, not after Redis confirms them or persistWait runs out. It reports
// whether that ended the release. The caller holds mu.
func (o *Owner) takeBackPersisting(rel *release) bool {
	var back, rest []int
	for _, p := range rel.parts {
		if o.owns(p) {
			back = append(back, p)
		} else {
			rest = append(rest, p)
		}
	}
	if len(back) == 0 {
		return false
	}
	rg := o.ring.Load()
	set := setOf(rg, back)
	kept := rel.ev[:0]
	for _, e := range rel.ev {
		switch p := rg.Partition(e.Key); {
		case !set.Has(p):
			kept = append(kept, e)
		case !rel.partial.has(p, e.Key):
			// (One whose memory lacked what Redis holds is left out: it loads on first use.)
			o.cfg.Store.Seed(e.Key, e.Spec, e.Buckets)
		}
	}
	rel.ev, rel.parts = kept, rest
	o.settleReleased(back, nil)
	if len(rest) > 0 {
		return false
	}
	if o.endRelease(rel) {
		o.cfg.Logger.Info("release undone: the ring gave its partitions back", "partitions", len(back))
	}
	return true
}

// fencePoll is how often a persisting release looks again: whether its deltas are
// confirmed and its fences reached.
const fencePoll = 50 * time.Millisecond

// stepLater steps rel again after d (or sooner, if a timer is armed for sooner). The
// caller holds mu.
func (o *Owner) stepLater(rel *release, d time.Duration) {
	at := o.cfg.Clock.Since() + d
	if rel.stepAt != 0 && rel.stepAt <= at {
		return
	}
	rel.stepAt = at
	o.cfg.Clock.AfterFunc(d, func() {
		o.post(func() {
			if rel.stepAt == at {
				rel.stepAt = 0
				o.stepRelease(rel)
			}
			o.wakeAfter()
		})
	})
}

// checkFences asks Redis whether the fences of ps are reached; the release is moved on
// once every answer is in (reached fences are forgotten).
func (o *Owner) checkFences(rel *release, ps []int) {
	rel.checking = true
	var left atomic.Int32
	left.Store(int32(len(ps)))
	for _, p := range ps {
		o.ask(func() {
			o.reached(p, func(bool) {
				if left.Add(-1) == 0 { // (an answer may come at once, inside this ask)
					o.cfg.Clock.AfterFunc(0, func() {
						o.post(func() {
							rel.checking = false
							o.stepRelease(rel)
							o.wakeAfter()
						})
					})
				}
			})
		})
	}
}

// persisted ends a release whose counters Redis has: its partitions are released, and
// their new owners told, so that they ask for the leases at once.
func (o *Owner) persisted(rel *release) {
	ps := rel.parts
	rel.parts = nil
	o.cfg.Logger.Info("released partitions through Redis", "partitions", len(ps), "counters", len(rel.ev))
	o.settleReleased(ps, nil)
	o.endRelease(rel) // (last: WaitReleased's callers may look at once)
	o.tellReleased(ps)
}

// tellReleased tells each new owner that its partitions were released. Best effort.
func (o *Owner) tellReleased(ps []int) {
	for _, g := range byOwner(o.ring.Load(), ps) {
		h := &Handoff{From: o.cfg.Self, ID: o.recv.nextID.Add(1), Partitions: g.parts}
		o.ask(func() {
			o.cfg.Peers.Handoff(g.m.RPCAddr, h, func(err error) {
				if err != nil {
					o.cfg.Logger.Debug("handoff of released partitions not delivered", "to", g.m.Name, "err", err)
				}
			})
		})
	}
}

type ownerGroup struct {
	m     ring.Member
	parts []int
}

// byOwner groups ps by their owner in rg, in member name order.
func byOwner(rg *ring.Ring, ps []int) []ownerGroup {
	var out []ownerGroup
	for _, p := range ps {
		m, ok := rg.PartitionOwner(p)
		if !ok {
			continue
		}
		i := slices.IndexFunc(out, func(g ownerGroup) bool { return g.m.Name == m.Name })
		if i < 0 {
			i = len(out)
			out = append(out, ownerGroup{m: m})
		}
		out[i].parts = append(out[i].parts, p)
	}
	slices.SortFunc(out, func(a, b ownerGroup) int { return cmp.Compare(a.m.Name, b.m.Name) })
	return out
}

// withUnsent takes back from the write-behind what the released partitions' counters
// had not sent, to travel with them as their pending part; counters no longer in
// memory travel with that part alone. The caller holds mu, with no flush in flight.
func (o *Owner) withUnsent(ev []leaparray.Evicted, rg *ring.Ring, set lease.Set) []leaparray.Evicted {
	unsent := o.takeUnsent(o.flush.unsettledIn(rg, set))
	for i := range ev {
		ref := fallback.CounterRef{Key: ev[i].Key, Spec: ev[i].Spec}
		ev[i].Pending, ev[i].Reset = combine(unsent[ref])
		delete(unsent, ref)
	}
	refs := make([]fallback.CounterRef, 0, len(unsent))
	for ref := range unsent {
		refs = append(refs, ref)
	}
	sortRefs(refs)
	for _, ref := range refs {
		e := leaparray.Evicted{Key: ref.Key, Spec: ref.Spec}
		e.Pending, e.Reset = combine(unsent[ref])
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
		out = fallback.AddBuckets(out, d.Buckets)
	}
	return out, reset
}

// goneAfter is how long a node out of the ring is waited for when a Handoff to it is in
// doubt: as long as a lent partition waits for its counters (lend.go). A variable for
// tests.
var goneAfter = lentMax

func remove(from, drop []int) []int {
	out := from[:0:0]
	for _, p := range from {
		if !containsInt(drop, p) {
			out = append(out, p)
		}
	}
	return out
}

// settleReleased marks partitions a release has dealt with: this node's if the ring gives them
// back (lent, if their counters went to another node, which hands them back in turn:
// lentTo), else idle. Their claims follow. The caller holds mu.
func (o *Owner) settleReleased(ps []int, lentTo map[int]string) {
	o.decide.Lock()
	for _, p := range ps {
		if o.owns(p) {
			o.handedBack(p, lentTo)
		} else {
			o.step(p, o.handedOn(lentTo[p]))
		}
	}
	o.unlockDecide()
	o.cfg.Leases.SetClaims(o.parts.claims())
}

// endRelease forgets a release that is done, and reports whether it had not already.
func (o *Owner) endRelease(rel *release) bool {
	rs := &o.releases
	i := slices.Index(rs.jobs, rel)
	if i < 0 {
		return false
	}
	rs.jobs = slices.Delete(rs.jobs, i, i+1)
	if len(rs.jobs) == 0 {
		close(rs.idle)
	}
	return true
}

// abandonReleases gives up every release (the owner stops): what they hold is lost,
// and logged. The caller holds mu.
func (o *Owner) abandonReleases() {
	o.dropReleases(func(parts, counters int) {
		o.cfg.Logger.Error("release gave up: these counters are lost", "partitions", parts, "counters", counters)
	})
}

// DropReleases gives up every release under way, and reports how many counters they
// held: for a node that stops with no member staying and no Redis, whose counters have
// nowhere to go (its caller says so once, rather than a loss per release).
func (o *Owner) DropReleases() (counters int) {
	o.do(func() { o.dropReleases(func(_, n int) { counters += n }) })
	return counters
}

// dropReleases gives up every release, telling each one's partitions and counters to
// dropped. The caller holds mu.
func (o *Owner) dropReleases(dropped func(parts, counters int)) {
	for _, rel := range slices.Clone(o.releases.jobs) {
		n := len(rel.ev)
		for _, p := range rel.parts {
			n += len(rel.byPart[p])
		}
		dropped(len(rel.parts), n)
		ps := rel.parts
		rel.parts = nil
		o.settleReleased(ps, nil)
		o.endRelease(rel)
	}
}

// WaitReleased waits until every release started so far is done (or ctx ends).
func (o *Owner) WaitReleased(ctx context.Context) error {
	var ch <-chan struct{}
	o.do(func() { ch = o.releases.idle })
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// held sums what the releases hold of the counter: its pending part (pending), or all
// its buckets.
func (rs *releases) held(ref fallback.CounterRef, pending bool) uint64 {
	var n uint64
	add := func(key string, sp leaparray.Spec, buckets, pend []leaparray.Bucket) {
		if key != ref.Key || sp != ref.Spec {
			return
		}
		if pending {
			n += sumBuckets(pend)
		} else {
			n += sumBuckets(buckets)
		}
	}
	for _, rel := range rs.jobs {
		if !pending || !rel.persist { // (persisting, the pending parts are in the write-behind)
			for _, e := range rel.ev {
				add(e.Key, e.Spec, e.Buckets, e.Pending)
			}
		}
		for _, p := range sortedKeys(rel.byPart) {
			for _, c := range rel.byPart[p] {
				add(c.Key, c.Spec, c.Buckets, c.Pending)
			}
		}
	}
	return n
}
