package owner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// maxRetry bounds the deltas kept for writing again while Redis is down; past it the
// oldest are dropped (and logged), so an outage cannot grow memory without limit.
const maxRetry = 1 << 20

// flusher is the write-behind state. retry and the reset queue are shared between the
// flush loop and Release/Forget, under mu.
type flusher struct {
	mu      sync.Mutex
	retry   []fallback.Delta
	resets  []fallback.CounterRef
	pending map[fallback.CounterRef]int // resets queued and not yet applied in Redis
	buf     []leaparray.Delta
}

func (f *flusher) init() { f.pending = map[fallback.CounterRef]int{} }

func (f *flusher) queueReset(ref fallback.CounterRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, ref)
	f.pending[ref]++
}

func (f *flusher) resetPending(key string, sp leaparray.Spec) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending[fallback.CounterRef{Key: key, Spec: sp}] > 0
}

// Run writes deltas behind every FlushInterval until Close.
func (o *Owner) Run() {
	defer close(o.done)
	if o.cfg.Redis == nil {
		<-o.quit
		return
	}
	t := time.NewTicker(o.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-o.quit:
			o.flushOnce(context.Background()) // what the last tick left
			return
		case <-t.C:
			o.flushOnce(context.Background())
		}
	}
}

// Close stops write-behind after a last flush, and waits for it.
func (o *Owner) Close() {
	select {
	case <-o.quit:
	default:
		close(o.quit)
	}
	<-o.done
}

// flushOnce applies queued resets, drops journaled counters from memory, and writes
// every pending delta.
func (o *Owner) flushOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resets := o.takeResets()
	var extra []fallback.Delta
	holdingLoad := false
	if keys := o.takeJournals(ctx); len(keys) > 0 {
		extra = pendingOf(o.evict(func(k string) bool { return keys[k] }))
		holdingLoad = true
	}
	o.writes.Lock()
	o.flush.buf = o.cfg.Store.Drain(o.flush.buf[:0])
	o.applyResets(ctx, resets)
	if err := o.write(ctx, append(extra, toFallback(o.flush.buf)...)); err != nil && holdingLoad {
		o.writeAll(ctx, nil) // loads of the evicted counters wait for their deltas
	}
	o.writes.Unlock()
	if holdingLoad {
		o.load.Unlock()
	}
}

// takeJournals takes this node's journal, and those of departed members, and returns
// the keys this node owns among them. Entries for counters another node owns now (the
// writer's ring was behind, or this node just lost them) go on to that node's journal.
func (o *Owner) takeJournals(ctx context.Context) map[string]bool {
	names := []string{o.cfg.Self}
	if o.cfg.Departed != nil {
		names = append(names, o.cfg.Departed()...)
	}
	rg := o.ring.Load()
	mine := map[string]bool{}
	elsewhere := map[string][]fallback.CounterRef{}
	for _, name := range names {
		refs, err := o.cfg.Redis.TakeJournal(ctx, name, 10_000)
		if err != nil {
			continue
		}
		for _, r := range refs {
			m, ok := ring.Member{}, false
			if rg != nil {
				m, ok = rg.Owner(r.Key)
			}
			if !ok || m.Name == o.cfg.Self {
				mine[r.Key] = true
			} else {
				elsewhere[m.Name] = append(elsewhere[m.Name], r)
			}
		}
	}
	for name, refs := range elsewhere {
		if err := o.cfg.Redis.Journal(ctx, name, refs); err != nil {
			o.cfg.Logger.Warn("journal entries not passed on", "to", name, "entries", len(refs), "err", err)
		}
	}
	return mine
}

func (o *Owner) takeResets() []fallback.CounterRef {
	o.flush.mu.Lock()
	defer o.flush.mu.Unlock()
	r := o.flush.resets
	o.flush.resets = nil
	return r
}

// applyResets deletes reset counters in Redis, before the deltas drained after them are
// written, and drops the older deltas still waiting to be written again.
func (o *Owner) applyResets(ctx context.Context, resets []fallback.CounterRef) {
	var failed []fallback.CounterRef
	for _, r := range resets {
		if _, err := o.cfg.Redis.Reset(ctx, r.Key, r.Spec, o.cfg.Now()); err != nil {
			failed = append(failed, r)
		}
	}
	o.flush.mu.Lock()
	defer o.flush.mu.Unlock()
	for _, r := range resets {
		if o.flush.pending[r]--; o.flush.pending[r] <= 0 {
			delete(o.flush.pending, r)
		}
	}
	o.flush.resets = append(failed, o.flush.resets...)
	for _, r := range failed {
		o.flush.pending[r]++
	}
	if len(resets) > len(failed) {
		gone := make(map[fallback.CounterRef]bool, len(resets))
		for _, r := range resets {
			gone[r] = true
		}
		kept := o.flush.retry[:0]
		for _, d := range o.flush.retry {
			if !gone[fallback.CounterRef{Key: d.Key, Spec: d.Spec}] {
				kept = append(kept, d)
			}
		}
		o.flush.retry = kept
	}
}

// write writes deltas (after those that failed before) and keeps what fails, for the
// next write; it reports whether anything failed.
func (o *Owner) write(ctx context.Context, deltas []fallback.Delta) error {
	o.flush.mu.Lock()
	all := append(o.flush.retry, deltas...)
	o.flush.retry = nil
	o.flush.mu.Unlock()
	if len(all) == 0 {
		return nil
	}
	err := o.cfg.Redis.FlushDeltas(ctx, all)
	if err == nil {
		return nil
	}
	defer func() { o.cfg.Logger.Debug("write-behind incomplete; kept for the next write", "err", err) }()
	var failed []fallback.Delta
	var fe *fallback.FlushError
	if errors.As(err, &fe) {
		for _, i := range fe.Failed {
			failed = append(failed, all[i])
		}
	} else {
		failed = all
	}
	o.flush.mu.Lock()
	defer o.flush.mu.Unlock()
	o.flush.retry = append(failed, o.flush.retry...)
	if over := len(o.flush.retry) - maxRetry; over > 0 {
		o.cfg.Logger.Error("write-behind: Redis unavailable too long; dropping the oldest deltas", "dropped", over)
		o.flush.retry = append([]fallback.Delta(nil), o.flush.retry[over:]...)
	}
	return err
}

// writeAll writes deltas and whatever failed before, trying again for up to a few
// seconds: a new owner is told to load only after this.
func (o *Owner) writeAll(ctx context.Context, deltas []fallback.Delta) {
	err := o.write(ctx, deltas)
	for attempt := 1; err != nil && attempt <= 20 && ctx.Err() == nil; attempt++ {
		time.Sleep(time.Duration(attempt) * 25 * time.Millisecond)
		err = o.write(ctx, nil)
	}
	if err != nil {
		o.cfg.Logger.Warn("handing off with deltas not yet written to Redis; the new owner may miss them", "err", err)
	}
}

func toFallback(ds []leaparray.Delta) []fallback.Delta {
	out := make([]fallback.Delta, len(ds))
	for i, d := range ds {
		out[i] = fallback.Delta{Key: d.Key, Spec: d.Spec, Buckets: d.Buckets}
	}
	return out
}

func pendingOf(ev []leaparray.Evicted) []fallback.Delta {
	var out []fallback.Delta
	for _, e := range ev {
		if len(e.Pending) > 0 {
			out = append(out, fallback.Delta{Key: e.Key, Spec: e.Spec, Buckets: e.Pending})
		}
	}
	return out
}
