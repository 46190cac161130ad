package owner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/lockrank"
	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// miss is a counter to load from Redis before its op is decided.
type miss struct {
	op      int    // index of the first op on it
	gen     uint64 // its partition's generation when the miss was seen
	buckets []leaparray.Bucket
	skipped bool // created without a load (skipsLoad)
	err     error
}

// load is the loads one request needs, going through their steps: wait for this node's
// own deltas of them to reach Redis, for other nodes' fences, read the partitions'
// stamps (some loads turn out needless), load, install and decide.
type load struct {
	r        *request
	rg       *ring.Ring
	misses   []*miss
	unloaded []int  // partitions of misses not decidable when listed: not decided in this request
	mark     uint64 // the store's reset mark when the misses were listed
	until    time.Duration
	token    uint64 // its current wait: a callback of an older one is ignored
	tries    int

	mu      lockrank.Mutex[lockrank.OwnerLoad] // the fence checks' answers come concurrently
	pending int                                // fence checks not answered yet
}

// settleWait bounds how long a load waits for this node's own deltas of the counter to
// reach Redis.
const settleWait = time.Second

// listMisses lists r's decidable ops whose counter is not in memory (one per counter),
// and returns them as a load (nil when there are none), with the partitions of such ops
// that are not decidable now (unloaded): those are not decided in this request even if
// their lease is granted before it is. The caller holds decide shared, and Redis is up.
func (o *Owner) listMisses(rg *ring.Ring, r *request, now time.Duration) (*load, []int) {
	seen := map[fallback.CounterRef]bool{}
	l := &load{r: r, rg: rg, mark: o.cfg.Store.ResetMark()}
	for i := range r.ops {
		op := &r.ops[i]
		if !op.Checked() || o.cfg.Store.HeldOrResetPending(op.Key, spec(op)) {
			continue // in memory, or reset here: what Redis holds of it is erased
		}
		p := rg.SlotPartition(op.Slot)
		ref := fallback.CounterRef{Key: op.Key, Spec: spec(op)}
		if seen[ref] {
			continue
		}
		if o.judge(p, now, true) != decideIt {
			if !containsInt(l.unloaded, p) {
				l.unloaded = append(l.unloaded, p)
			}
			continue
		}
		seen[ref] = true
		o.noteDecided(p)
		if o.skipsLoad(p, op) {
			o.skipped.Add(1)
			o.traceLoad(op.Key, p, nil)
			continue
		}
		l.misses = append(l.misses, &miss{op: i, gen: o.parts.at(p).Gen})
	}
	if len(l.misses) == 0 {
		return nil, l.unloaded
	}
	return l, l.unloaded
}

func (l *load) ref(m *miss) fallback.CounterRef {
	op := &l.r.ops[m.op]
	return fallback.CounterRef{Key: op.Key, Spec: spec(op)}
}

// todo lists the misses still to load.
func (l *load) todo() []*miss {
	var out []*miss
	for _, m := range l.misses {
		if m.err == nil && m.buckets == nil {
			out = append(out, m)
		}
	}
	return out
}

func (o *Owner) startLoad(l *load) {
	l.until = o.cfg.Clock.Since() + settleWait
	o.loadSettled(l, l.token)
}

// loadSettled goes on once none of the misses has deltas of this node not yet
// confirmed in Redis (its Redis state is behind: it just left memory), or fails those
// still waiting at settleWait.
func (o *Owner) loadSettled(l *load, token uint64) {
	o.flush.mu.Lock()
	if token != l.token {
		o.flush.mu.Unlock()
		return
	}
	l.token++
	var waiting []*miss
	for _, m := range l.misses {
		if m.err == nil && o.flush.refs[l.ref(m)] > 0 {
			waiting = append(waiting, m)
		}
	}
	if len(waiting) > 0 && o.cfg.Clock.Since() < l.until {
		t := l.token
		o.flush.settleWaiters = append(o.flush.settleWaiters, func() { o.loadSettled(l, t) })
		o.flush.mu.Unlock()
		o.cfg.Clock.AfterFunc(l.until-o.cfg.Clock.Since(), func() { o.loadSettled(l, t) })
		o.kick()
		return
	}
	o.flush.mu.Unlock()
	for _, m := range waiting {
		m.err = fmt.Errorf("%w: counter %q is still being written to Redis", counter.ErrUnavailable, l.r.ops[m.op].Key)
	}
	o.loadFences(l)
}

// loadFences goes on once the misses' partitions have no other node's write-behind
// in doubt (fence.go); the misses of partitions still fenced fail.
func (o *Owner) loadFences(l *load) {
	var ps []int
	for _, m := range l.todo() {
		if p := l.rg.SlotPartition(l.r.ops[m.op].Slot); !containsInt(ps, p) && o.fenced(p) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		o.loadStamps(l)
		return
	}
	l.pending = len(ps)
	for _, p := range ps {
		o.reached(p, func(ok bool) {
			l.mu.Lock()
			if !ok {
				for _, m := range l.todo() {
					if l.rg.SlotPartition(l.r.ops[m.op].Slot) == p {
						m.err = fmt.Errorf("%w: counter %q: the node it came from has not confirmed its writes in Redis yet", counter.ErrUnavailable, l.r.ops[m.op].Key)
					}
				}
			}
			l.pending--
			last := l.pending == 0
			l.mu.Unlock()
			if last {
				o.loadStamps(l)
			}
		})
	}
}

// loadStamps reads, once per partition and generation, the stamps of the misses'
// partitions not read yet (loadskip.go): the misses they show needless are created
// without a load.
func (o *Owner) loadStamps(l *load) {
	o.readQuiet(l.rg, l.todo(), l.r.ops, func() {
		for _, m := range l.todo() {
			if op := &l.r.ops[m.op]; o.skipsLoad(l.rg.SlotPartition(op.Slot), op) {
				o.skipped.Add(1)
				o.traceLoad(op.Key, l.rg.SlotPartition(op.Slot), nil)
				m.buckets, m.skipped = []leaparray.Bucket{}, true // nothing to load: created empty by its op
			}
		}
		o.loadFetch(l)
	})
}

// loadFetch loads the misses left from Redis, those that failed in a way that may pass
// (a timeout under load) twice more, then installs and decides.
func (o *Owner) loadFetch(l *load) {
	todo := l.todo()
	if len(todo) == 0 || l.tries == 3 || l.tries > 0 && !o.cfg.Redis.Healthy() {
		o.loadDone(l)
		return
	}
	if l.tries == 0 {
		o.loaded.Add(int64(len(todo)))
	}
	l.tries++
	refs := make([]fallback.CounterRef, len(todo))
	for i, m := range todo {
		refs[i] = l.ref(m)
	}
	o.cfg.Redis.LoadMany(l.r.ctx, refs, o.cfg.Now(), func(got []fallback.Loaded) {
		for i, r := range got {
			if r.Err != nil {
				todo[i].err = fmt.Errorf("%w: counter %q could not be loaded from Redis: %v", counter.ErrUnavailable, refs[i].Key, r.Err)
				continue
			}
			todo[i].err, todo[i].buckets = nil, r.Buckets
			if todo[i].buckets == nil {
				todo[i].buckets = []leaparray.Bucket{}
			}
		}
		if l.r.ctx.Err() == nil && l.tries < 3 && o.cfg.Redis.Healthy() && anyFailed(todo) {
			for _, m := range todo {
				if m.err != nil {
					m.err = nil // loaded again
				}
			}
			o.loadFetch(l)
			return
		}
		o.loadDone(l)
	})
}

func anyFailed(ms []*miss) bool {
	for _, m := range ms {
		if m.err != nil {
			return true
		}
	}
	return false
}

// loadDone installs what was loaded and decides the request.
func (o *Owner) loadDone(l *load) {
	o.decide.RLock()
	now := o.cfg.Clock.Since()
	failed := o.install(l)
	if o.loadAgain(l, failed, now) {
		o.decide.RUnlock()
		o.attempt(l.r)
		return
	}
	o.decideNow(l.rg, l.r, now, true, failed, l.unloaded)
	o.decide.RUnlock()
	o.answer(l.r)
}

// loadAgain reports whether l's request goes round again (judged, parked, loaded)
// rather than be answered now: a partition of it changed while it loaded (went stale
// and is being reloaded, changed hands and came back, had a counter reset), and it may
// still wait. Answered now, such an op would be refused not-owned by the very node
// that owns it, an error in an ordinary operation the client would only retry here.
// The caller holds decide shared.
func (o *Owner) loadAgain(l *load, failed map[int]error, now time.Duration) bool {
	if !o.mayWait(l.r, now) {
		return false
	}
	for _, err := range failed {
		if errors.Is(err, counter.ErrNotOwner) {
			return true
		}
	}
	rg := o.ring.Load()
	return rg != l.rg || o.waitsFor(rg, l.r.ops, now, o.redisUp()) >= 0
}

// install puts the loaded counters in memory, with decide held shared, unless their
// partition changed state meanwhile (its memory was dropped or handed on: the load may
// predate writes it must see) or a counter was reset meanwhile (the load may predate
// that reset: leaparray.Store.TrySeed). It returns, by op index, the ops whose counter
// is not usable; every op on such a counter gets the error.
func (o *Owner) install(l *load) map[int]error {
	bad := map[fallback.CounterRef]error{}
	for _, m := range l.misses {
		op := &l.r.ops[m.op]
		ref := l.ref(m)
		p := l.rg.SlotPartition(op.Slot)
		switch {
		case m.err != nil:
			bad[ref] = m.err
		case m.buckets == nil:
			bad[ref] = fmt.Errorf("%w: counter %q was not loaded", counter.ErrUnavailable, op.Key)
		case o.parts.at(p).Gen != m.gen:
			bad[ref] = fmt.Errorf("%w: partition %d changed hands while %q was loaded", counter.ErrNotOwner, p, op.Key)
		default:
			// A no-op if another op loaded it first. A load is a new counter in memory
			// like any other: within the store's bounds (its state stays in Redis).
			mark := l.mark
			if mutate.On(mutate.SkipResetCheck) {
				mark = o.cfg.Store.ResetMark()
			}
			if !m.skipped {
				o.traceLoad(op.Key, p, m.buckets)
			}
			if _, err := o.cfg.Store.TrySeed(op.Key, spec(op), m.buckets, o.cfg.Now(), mark); errors.Is(err, leaparray.ErrResetSince) {
				bad[ref] = fmt.Errorf("%w: a counter was reset while %q was loaded", counter.ErrNotOwner, op.Key)
			} else if err != nil {
				bad[ref] = counter.StoreError(err)
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	failed := map[int]error{}
	for i := range l.r.ops {
		op := &l.r.ops[i]
		if err, ok := bad[fallback.CounterRef{Key: op.Key, Spec: spec(op)}]; ok && !o.cfg.Store.Has(op.Key, spec(op)) {
			failed[i] = err
		}
	}
	return failed
}

// traceLoad logs, at debug level, a counter loaded from Redis (buckets) or created
// without a load (nil): the story of a count that went wrong starts there.
func (o *Owner) traceLoad(key string, p int, buckets []leaparray.Bucket) {
	if !o.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	if buckets == nil {
		o.cfg.Logger.Debug("counter created without a load", "key", key, "partition", p, "gen", o.parts.at(p).Gen)
		return
	}
	var sum uint64
	for _, b := range buckets {
		sum += b.Count
	}
	o.cfg.Logger.Debug("counter loaded", "key", key, "partition", p, "gen", o.parts.at(p).Gen, "sum", sum, "buckets", len(buckets))
}
