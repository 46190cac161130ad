package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/owner"
)

// redisServer models what leapcount keeps in Redis, as its scripts keep it: counters
// (a hash of buckets each), each writer's high-water mark (calls apply once), the
// partition stamps and the late-write marks. Its faults: down (unreachable), slow,
// replies lost after the call applied, a restart that empties it, and a replica that
// stops following it and then takes over (a failover to a replica that lagged) or
// catches up. Nodes write as with --redis-wait-replicas 1: a write the replica does not
// follow is answered not replicated, in doubt.
type redisServer struct {
	w         *world
	down      bool
	downUntil time.Duration
	slow      time.Duration // added to every call's way there
	lose      float64       // chance a reply is lost (the call applied)
	reopened  uint64        // times it came back after being down

	counters map[fallback.CounterRef]map[int64]uint64
	marks    map[string]uint64 // writer key → seq of its last call applied
	stamps   map[int]int64
	epoch    string
	late     map[int]int64
	lateSeq  int64

	lagging *redisServer // while its replica does not follow: what the replica holds
}

// snapshot copies what the server holds (what a replica that stops following has).
func (r *redisServer) snapshot() *redisServer {
	c := &redisServer{counters: map[fallback.CounterRef]map[int64]uint64{}, marks: maps.Clone(r.marks),
		stamps: maps.Clone(r.stamps), epoch: r.epoch, late: maps.Clone(r.late), lateSeq: r.lateSeq}
	for ref, bs := range r.counters {
		c.counters[ref] = maps.Clone(bs)
	}
	return c
}

// takeOver makes the lagging replica's data the server's, as a failover to it does.
func (r *redisServer) takeOver() {
	l := r.lagging
	r.counters, r.marks, r.stamps, r.epoch, r.late, r.lateSeq = l.counters, l.marks, l.stamps, l.epoch, l.late, l.lateSeq
	r.lagging = nil
}

// replicated is what a write's WAIT says: whether the replica follows.
func (r *redisServer) replicated() bool { return r.lagging == nil }

func newRedisServer(w *world) *redisServer {
	r := &redisServer{w: w}
	r.wipe()
	return r
}

// wipe empties it, as a restart without persistence does.
func (r *redisServer) wipe() {
	r.counters = map[fallback.CounterRef]map[int64]uint64{}
	r.marks = map[string]uint64{}
	r.stamps = map[int]int64{}
	r.epoch = ""
	r.late = map[int]int64{}
	r.lateSeq = 0
	r.lagging = nil // the replica syncs from the emptied server
}

// count is the counter's count at now (ms), as Redis holds it: at its newest bucket,
// if that is past now's (written by a clock ahead), as the scripts act (common.lua).
func (r *redisServer) count(ref fallback.CounterRef, now int64) uint64 {
	var n uint64
	head := r.head(ref, now)
	for j, c := range r.counters[ref] {
		if j > head-int64(ref.Spec.Buckets) && j <= head {
			n += c
		}
	}
	return n
}

// head is the bucket the counter acts at now: now's, or its newest if that is later.
func (r *redisServer) head(ref fallback.CounterRef, now int64) int64 {
	head := ref.Spec.Bucket(now)
	for j := range r.counters[ref] {
		head = max(head, j)
	}
	return head
}

// lost is what the counter loses when Redis loses its data: its count at now, or for
// a fresh key (fresh.go), whose window is short next to the clocks' skew, every bucket
// it holds.
func (r *redisServer) lost(ref fallback.CounterRef, now int64) uint64 {
	if !isFresh(ref.Key) {
		return r.count(ref, now)
	}
	var n uint64
	for _, c := range r.counters[ref] {
		n += c
	}
	return n
}

func (r *redisServer) apply(d fallback.Delta) {
	ref := fallback.CounterRef{Key: d.Key, Spec: d.Spec}
	if d.Reset {
		delete(r.counters, ref)
	}
	if len(d.Buckets) == 0 {
		return
	}
	bs := r.counters[ref]
	if bs == nil {
		bs = map[int64]uint64{}
		r.counters[ref] = bs
	}
	for _, b := range d.Buckets {
		bs[b.Index] += b.Count
	}
}

// redisClient is one node's connection to the server: it implements owner.Redis, every
// answer coming back as an event of that node, after the way there and back.
type redisClient struct {
	srv    *redisServer
	n      *node
	seq    uint64 // calls made: each batch call's seq (fallback.Store's)
	writer string // the writer key of this node's run
	cuts   uint64 // times its way to Redis healed (Reopened, with the server's restarts)
	// behind: its last write was not replicated (fallback's breaker: Redis taken as
	// down until a write is); backs counts its ends (Reopened).
	behind bool
	backs  uint64
}

// errNotReplicated is a write the replica did not acknowledge: it applied, and may be
// lost by a failover (fallback.ErrNotReplicated).
var errNotReplicated = errors.New("sim: written on the master, not on the replica")

// wrote records a write's WAIT, and turns a write not replicated into its error.
func (c *redisClient) wrote(replicated bool, err error) error {
	switch {
	case err != nil:
		return err
	case !replicated:
		c.behind = true
		return errNotReplicated
	case c.behind:
		c.behind = false
		c.backs++
	}
	return nil
}

// cut reports whether this node's way to Redis is cut now.
func (c *redisClient) cut() bool { return c.srv.w.sched.now < c.n.redisCut }

var errRedisDown = errors.New("sim: redis unreachable")

// timeout is how long a call goes unanswered before it fails (fallback's read timeout).
const redisTimeout = 300 * time.Millisecond

// call models one round trip: at the server (if it reaches it) apply runs and its
// result comes back; or, unreachable at once, unsent reports it. As with a real Redis,
// a call the client gave up on (timeout, lost request or reply) may have applied,
// may never apply, or may still apply later: a call slower than the timeout applies
// after its client heard it fail, and lose is the chance that a request or a reply is
// lost (half each).
func (c *redisClient) call(apply func() any, back func(v any, err error)) {
	w := c.srv.w
	if c.srv.down {
		w.sched.after(w.jitter(200*time.Microsecond), c.n, func() { back(nil, fmt.Errorf("%w: connection refused", errRedisDown)) })
		return
	}
	there := w.jitter(300*time.Microsecond) + c.srv.slow
	if c.cut() {
		w.sched.after(redisTimeout, c.n, func() { back(nil, errors.New("sim: redis timeout (cut)")) })
		return
	}
	if there > redisTimeout {
		w.sched.after(redisTimeout, c.n, func() { back(nil, errors.New("sim: redis timeout")) })
		w.sched.after(there, nil, func() {
			if !c.srv.down {
				apply() // after its client gave up
			}
		})
		return
	}
	w.sched.after(there, nil, func() {
		lose := c.srv.lose
		if w.sched.now < c.n.redisFlaky {
			lose = max(lose, 0.5)
		}
		lost := w.rng.Float64() < lose
		if c.srv.down || lost && w.rng.IntN(2) == 0 {
			w.sched.after(redisTimeout-there, c.n, func() { back(nil, errors.New("sim: redis timeout")) })
			return
		}
		v := apply()
		if lost || c.cut() {
			w.sched.after(redisTimeout-there, c.n, func() { back(nil, errors.New("sim: redis reply lost")) })
			return
		}
		w.sched.after(w.jitter(300*time.Microsecond), c.n, func() { back(v, nil) })
	})
}

func (c *redisClient) Healthy() bool    { return !c.srv.down && !c.cut() && !c.behind }
func (c *redisClient) Reopened() uint64 { return c.srv.reopened + c.cuts + c.backs }

func (c *redisClient) LoadMany(_ context.Context, refs []fallback.CounterRef, now int64, done func([]fallback.Loaded)) {
	for _, ref := range refs {
		if isFresh(ref.Key) {
			c.srv.w.fresh.loaded(ref.Key, now)
		}
	}
	c.call(func() any {
		out := make([]fallback.Loaded, len(refs))
		for i, ref := range refs {
			head := c.srv.head(ref, now) // (fallback's windowOf)
			var bs []leaparray.Bucket
			for j, n := range c.srv.counters[ref] {
				if j > head-int64(ref.Spec.Buckets) && j <= head && n > 0 {
					bs = append(bs, leaparray.Bucket{Index: j, Count: n})
				}
			}
			slices.SortFunc(bs, func(a, b leaparray.Bucket) int { return int(a.Index - b.Index) })
			out[i].Buckets = bs
			if ref.Key == debugKey {
				c.srv.w.trace("DEBUG %s loads %s from redis: %d", c.n.name, ref.Key, c.srv.count(ref, now))
			}
		}
		return out
	}, func(v any, err error) {
		if err != nil {
			out := make([]fallback.Loaded, len(refs))
			for i := range out {
				out[i].Err = err
			}
			done(out)
			return
		}
		done(v.([]fallback.Loaded))
	})
}

func (c *redisClient) Written(_ int, ps []int, done func([]int64, error)) {
	c.call(func() any {
		out := make([]int64, len(ps))
		for i, p := range ps {
			out[i] = c.srv.stamps[p]
			if debugKey != "" && c.n.ring != nil && c.n.ring.Partition(debugKey) == p {
				c.srv.w.trace("DEBUG %s reads stamp of %d: %d", c.n.name, p, out[i])
			}
		}
		return out
	}, func(v any, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(v.([]int64), nil)
	})
}

func (c *redisClient) StampWritten(_ int, ps []int, now int64, epoch string, done func(string, error)) {
	c.call(func() any {
		if c.srv.epoch == "" {
			c.srv.epoch = epoch
		}
		for _, p := range ps {
			c.srv.stamps[p] = max(c.srv.stamps[p], now)
			if debugKey != "" && c.n.ring != nil && c.n.ring.Partition(debugKey) == p {
				c.srv.w.trace("DEBUG %s stamps %d: %d", c.n.name, p, now)
			}
		}
		return stampRead{c.srv.epoch, c.srv.replicated()}
	}, func(v any, err error) {
		r, _ := v.(stampRead)
		if err = c.wrote(r.replicated, err); err != nil {
			done("", err)
			return
		}
		done(r.epoch, nil)
	})
}

type stampRead struct {
	epoch      string
	replicated bool
}

func (c *redisClient) MarkLate(_ int, ps []int, done func(error)) {
	c.call(func() any {
		for _, p := range ps {
			c.srv.late[p]++
		}
		c.srv.lateSeq++
		return c.srv.replicated()
	}, func(v any, err error) { done(c.wrote(v == true, err)) })
}

func (c *redisClient) LateMarks(_ int, since int64, done func(int64, map[int]int64, error)) {
	c.call(func() any {
		if c.srv.lateSeq == since {
			return lateRead{seq: since}
		}
		marks := make(map[int]int64, len(c.srv.late))
		for p, m := range c.srv.late {
			marks[p] = m
		}
		return lateRead{seq: c.srv.lateSeq, marks: marks}
	}, func(v any, err error) {
		if err != nil {
			done(0, nil, err)
			return
		}
		r := v.(lateRead)
		done(r.seq, r.marks, nil)
	})
}

type lateRead struct {
	seq   int64
	marks map[int]int64
}

// Reached reads the fences' marks as fallback.Store.Reached does with
// --redis-wait-replicas: each read refreshes the mark (a write) and waits for the
// replica, and a mark the replica may not hold is not reached.
func (c *redisClient) Reached(fs []fallback.Fence, done func(bool, error)) {
	c.call(func() any {
		wrote := false // a mark found is refreshed: a write the replica must acknowledge
		for _, f := range fs {
			m, ok := c.srv.marks[f.WriterKey]
			wrote = wrote || ok
			if m < f.Seq {
				return reachedRead{replicated: !wrote || c.srv.replicated()}
			}
		}
		return reachedRead{reached: true, replicated: c.srv.replicated()}
	}, func(v any, err error) {
		r, _ := v.(reachedRead)
		if err = c.wrote(r.replicated, err); err != nil && !errors.Is(err, errNotReplicated) {
			done(false, err)
			return
		}
		done(r.reached && err == nil, nil)
	})
}

type reachedRead struct{ reached, replicated bool }

// ProbeReplicas writes a probe, as fallback.Store.ProbeReplicas does while the last
// write was not replicated: its WAIT says whether the replica follows again.
func (c *redisClient) ProbeReplicas(_ int64, done func(error)) {
	if !c.behind {
		c.srv.w.sched.after(0, c.n, func() { done(nil) }) // never before it returns, as in production
		return
	}
	c.call(func() any { return c.srv.replicated() }, func(v any, err error) {
		replicated, _ := v.(bool)
		done(c.wrote(replicated, err))
	})
}

func (c *redisClient) Epoch(_ int, done func(string, error)) {
	c.call(func() any { return c.srv.epoch }, func(v any, err error) {
		if err != nil {
			done("", err)
			return
		}
		done(v.(string), nil)
	})
}

// Time answers Redis's clock: the simulation's own time (the nodes' counters' clocks
// are it plus their offsets), µs since the Unix epoch, as it is when the call gets
// there. It takes a fixed 300 µs each way (plus Redis's slowness) and draws nothing from
// the run's stream, so that a run's story is the one its seed told before nodes read
// Redis's clock; it fails as any call does while Redis is down or cut off from the node.
func (c *redisClient) Time(done func(int64, error)) {
	w := c.srv.w
	const way = 300 * time.Microsecond
	switch {
	case c.srv.down:
		w.sched.after(way, c.n, func() { done(0, fmt.Errorf("%w: connection refused", errRedisDown)) })
		return
	case c.cut() || 2*way+c.srv.slow > redisTimeout:
		w.sched.after(redisTimeout, c.n, func() { done(0, errors.New("sim: redis timeout")) })
		return
	}
	w.sched.after(way+c.srv.slow, nil, func() {
		at := w.epochMs*1000 + int64(w.sched.now/time.Microsecond)
		w.sched.after(way, c.n, func() { done(at, nil) })
	})
}

// DropInDoubt drops deltas of calls in doubt: one that applied is in what Redis held
// when it lost its data (wipes.go), and one that did not is lost.
func (c *redisClient) DropInDoubt(ob owner.Batch, drop func(fallback.Delta) bool) int {
	n := 0
	for _, k := range ob.(*simBatch).calls {
		if k.state != inDoubt {
			continue
		}
		kept := k.deltas[:0]
		for _, d := range k.deltas {
			if !drop(d) {
				kept = append(kept, d)
				continue
			}
			n++
			if !k.applied {
				c.srv.w.lateDropped(c.n, d)
			}
		}
		if k.deltas = kept; len(k.deltas) == 0 {
			k.state = confirmed
		}
	}
	return n
}

func (c *redisClient) Rewrite(ob owner.Batch, fn func(fallback.Delta) (fallback.Delta, bool)) int {
	n := 0
	for _, k := range ob.(*simBatch).calls {
		if k.state == confirmed {
			continue
		}
		kept := k.deltas[:0]
		for _, d := range k.deltas {
			nd, keep := fn(d)
			if !keep || nd.Reset != d.Reset || nd.ResetBy != d.ResetBy || len(nd.Buckets) != len(d.Buckets) {
				n++
			}
			if keep {
				kept = append(kept, nd)
			} else {
				c.srv.w.inDoubtDropped(c.n, k.writer, d)
			}
		}
		k.deltas = kept
		if len(k.deltas) == 0 {
			k.state = confirmed
		}
	}
	return n
}
