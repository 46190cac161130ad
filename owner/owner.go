package owner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

// Sender delivers Handoffs to other nodes (rpc.Client in production).
type Sender interface {
	Handoff(ctx context.Context, addr string, h *rpc.Handoff) error
}

// Config is what an Owner needs.
type Config struct {
	Self   string           // this node's member name (its journal is named after it)
	Store  *leaparray.Store // made WithDeltas when Redis is set
	Redis  *fallback.Store  // nil: no persistence; Handoffs carry state
	Sender Sender
	Now    func() int64
	Limits counter.Limits

	// Departed lists members that left or died: their journals are taken over (routed to
	// the counters' current owners), since fallback writes may still name them.
	Departed func() []string

	FlushInterval time.Duration // default 100ms
	HandoffWait   time.Duration // how long a new owner waits for the old one's Handoff; default 2s
	Logger        *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.FlushInterval <= 0 {
		c.FlushInterval = 100 * time.Millisecond
	}
	if c.HandoffWait <= 0 {
		c.HandoffWait = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Owner decides ops on the counters this node owns. See the package doc.
type Owner struct {
	cfg   Config
	local counter.Local

	decide sync.RWMutex
	load   sync.RWMutex
	writes sync.Mutex                // held from a drain (or eviction) until its deltas are written
	ring   atomic.Pointer[ring.Ring] // the ring ops are checked against under decide
	gate   gate
	flush  flusher
	hand   handoffs

	quit chan struct{}
	done chan struct{}
}

// New returns an Owner; Run starts its write-behind.
func New(cfg Config) *Owner {
	cfg = cfg.withDefaults()
	o := &Owner{cfg: cfg, local: counter.Local{Store: cfg.Store, Now: cfg.Now, Limits: cfg.Limits},
		quit: make(chan struct{}), done: make(chan struct{})}
	o.gate.init()
	o.flush.init()
	o.hand.init(cfg)
	return o
}

// Do decides ops this node owns. Ops of partitions still being handed to this node wait
// for the Handoff first (bounded by HandoffWait); counters not in memory are loaded from
// Redis.
func (o *Owner) Do(ctx context.Context, ops []counter.Op, results []counter.Result) {
	o.gate.await(ctx, ops)
	o.decide.RLock()
	defer o.decide.RUnlock()
	if ctx.Err() != nil {
		// A forwarded request's deadline passed while it waited: its sender has given up
		// and may have decided the ops elsewhere. Deciding them too would count twice.
		for i := range results {
			results[i] = counter.Result{Err: fmt.Errorf("%w: %v", rpc.ErrExpired, ctx.Err())}
		}
		return
	}
	if moved := o.notOwned(ops); moved != nil {
		o.decideOwned(ctx, ops, results, moved)
		return
	}
	o.decideAll(ctx, ops, results)
}

func (o *Owner) decideAll(ctx context.Context, ops []counter.Op, results []counter.Result) {
	if o.cfg.Redis != nil {
		if unloaded := o.ensureLoaded(ctx, ops); unloaded != nil {
			o.decideLoaded(ctx, ops, results, unloaded)
			return
		}
	}
	o.local.Do(ctx, ops, results)
	if o.cfg.Redis != nil {
		o.queueResets(ops, results)
	}
}

// notOwned marks the ops whose key this node no longer owns: the ring changed after the
// router sent them here, and their counters may already have left memory. Under decide
// the answer cannot change until the batch is decided.
func (o *Owner) notOwned(ops []counter.Op) []bool {
	rg := o.ring.Load()
	if rg == nil {
		return nil
	}
	var moved []bool
	for i := range ops {
		if m, ok := rg.Owner(ops[i].Key); ok && m.Name != o.cfg.Self {
			if moved == nil {
				moved = make([]bool, len(ops))
			}
			moved[i] = true
		}
	}
	return moved
}

// decideOwned decides the ops still owned and answers the others rpc.ErrNotOwner
// (certainly not decided: the router sends them to the new owner).
func (o *Owner) decideOwned(ctx context.Context, ops []counter.Op, results []counter.Result, moved []bool) {
	counter.DoExcept(ctx, ops, results, func(i int) error {
		if moved[i] {
			return fmt.Errorf("%w: %q moved while this node decided it", rpc.ErrNotOwner, ops[i].Key)
		}
		return nil
	}, o.decideAll)
}

// decideLoaded decides the ops whose counters could be loaded, and answers the others
// ErrUnavailable: deciding them from an empty counter would forget what Redis holds.
func (o *Owner) decideLoaded(ctx context.Context, ops []counter.Op, results []counter.Result, unloaded []bool) {
	counter.DoExcept(ctx, ops, results, func(i int) error {
		if unloaded[i] {
			return fmt.Errorf("%w: counter %q could not be loaded from Redis", counter.ErrUnavailable, ops[i].Key)
		}
		return nil
	}, func(ctx context.Context, ops []counter.Op, results []counter.Result) {
		o.local.Do(ctx, ops, results)
		o.queueResets(ops, results)
	})
}

// ensureLoaded loads from Redis the counters of ops that are not in memory, and marks
// the ops whose counter could not be loaded (nil when all were). Two ops may load the
// same counter at once: Seed creates it only once, so that costs a read, not a count. A
// counter whose reset has not reached Redis yet is not loaded back. When Redis is known
// to be down (its breaker is open) counters are not loaded and ops are decided from
// memory: availability first, as documented for the degraded mode.
func (o *Owner) ensureLoaded(ctx context.Context, ops []counter.Op) []bool {
	var misses []int
	for i := range ops {
		op := &ops[i]
		if o.cfg.Limits.Validate(op) == nil && !o.cfg.Store.Has(op.Key, spec(op)) {
			misses = append(misses, i)
		}
	}
	if len(misses) == 0 || !o.cfg.Redis.Healthy() {
		return nil
	}
	o.load.RLock()
	defer o.load.RUnlock()
	now := o.cfg.Now()
	var unloaded []bool
	for _, i := range misses {
		op := &ops[i]
		sp := spec(op)
		if o.flush.resetPending(op.Key, sp) || o.cfg.Store.Has(op.Key, sp) {
			continue
		}
		buckets, err := o.loadRetrying(ctx, op.Key, sp, now)
		if err != nil {
			if !o.cfg.Redis.Healthy() {
				continue // Redis went down meanwhile: degraded, decided from memory
			}
			if unloaded == nil {
				unloaded = make([]bool, len(ops))
			}
			unloaded[i] = true
			continue
		}
		o.cfg.Store.Seed(op.Key, sp, buckets)
	}
	return unloaded
}

// loadRetrying reads a counter from Redis, trying twice more after a failure that may
// pass (a timeout under load).
func (o *Owner) loadRetrying(ctx context.Context, key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var bs []leaparray.Bucket
		if bs, err = o.cfg.Redis.Load(ctx, key, sp, now); err == nil {
			return bs, nil
		}
		if ctx.Err() != nil || !o.cfg.Redis.Healthy() {
			break
		}
	}
	return nil, err
}

// queueResets hands the resets just decided to the flusher, which deletes the counters
// in Redis after the deltas drained before them and before the ones drained after.
func (o *Owner) queueResets(ops []counter.Op, results []counter.Result) {
	for i := range ops {
		if ops[i].Kind == counter.Reset && results[i].Err == nil {
			o.flush.queueReset(fallback.CounterRef{Key: ops[i].Key, Spec: spec(&ops[i])})
		}
	}
}

func spec(op *counter.Op) leaparray.Spec {
	return leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
}

// evict takes the counters that match out of memory, with no op being decided, and
// returns them. With Redis it returns holding load, which the caller releases once the
// evicted deltas are written (so that no load reads Redis before).
func (o *Owner) evict(match func(key string) bool) []leaparray.Evicted {
	o.decide.Lock()
	ev := o.cfg.Store.Evict(match)
	if o.cfg.Redis != nil {
		o.load.Lock()
	}
	o.decide.Unlock()
	return ev
}
